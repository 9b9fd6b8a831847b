"""cuda_library: compiles .cu files with nvcc for Hopper (sm_90a).

The objects land in a cc_library (alwayslink) that depends on the static CUDA runtime,
so any cc_binary or cc_test can link them. Without a CUDA toolkit (CUDA_ENABLED False)
the macro defines nothing, and callers guard their own uses with CUDA_ENABLED.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC")

# Hopper's own instructions (wgmma, setmaxnreg) need the "a" target; plain sm_90 refuses them.
CUDA_ARCH_FLAGS = ["-gencode=arch=compute_90a,code=sm_90a"]

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "--expt-relaxed-constexpr",
    "-Xcompiler=-fPIC",
    "-Xcompiler=-Wall",
    "-Werror=all-warnings",
    "-lineinfo",
]

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], nvcc_inputs = [], visibility = None, **kwargs):
    """A cc_library whose objects nvcc made from `srcs` (.cu) for sm_90a.

    `srcs` may name another package's files (a label); nvcc then needs that package's
    headers as well, in `nvcc_inputs` (a filegroup the package exports).
    """
    if not CUDA_ENABLED:
        return
    # nvcc sees the package's own headers (its folders' too); headers of other packages come
    # in `hdrs` or `nvcc_inputs`.
    local_hdrs = [h for h in native.glob(["**/*.h", "**/*.cuh"], allow_empty = True) if h not in hdrs]
    objs = []
    for src in srcs:
        stem = src.split(":")[-1].replace("/", "_").rsplit(".", 1)[0]
        obj = "_objs_%s/%s.o" % (name, stem)
        native.genrule(
            name = "%s_%s_nvcc" % (name, stem),
            srcs = [src] + hdrs + local_hdrs + nvcc_inputs,
            outs = [obj],
            cmd = " ".join([NVCC] + CUDA_ARCH_FLAGS + NVCC_FLAGS + copts + [
                "-I.",
                "-I$(GENDIR)",
                "-c",
                "$(location %s)" % src,
                "-o",
                "$@",
            ]),
            message = "nvcc sm_90a %s" % src,
            # "manual" libraries (instrumented and candidate builds) keep their nvcc step out
            # of `//...` too.
            tags = kwargs.get("tags", []),
            testonly = kwargs.get("testonly", False),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart_static"],
        alwayslink = True,
        visibility = visibility,
        **kwargs
    )
