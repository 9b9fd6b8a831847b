"""Repository rule @local_cuda: finds the CUDA toolkit on this machine.

CUDA is looked for at $CUDA_PATH, else /usr/local/cuda. When bin/nvcc is there the
repository exposes:
  :headers        the toolkit's C/C++ headers (cuda_fp8.h, cuda_runtime_api.h, ...)
  :cudart_static  the CUDA runtime, linked statically
  :cublaslt       cuBLASLt (shared)
and defs.bzl says CUDA_ENABLED = True and where nvcc is. Without nvcc the targets are
empty and CUDA_ENABLED = False, so BUILD files leave GPU targets out and the CPU-only
build still works.
"""

_BUILD_WITH_CUDA = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "headers",
    hdrs = glob(["include/*.h", "include/*.hpp", "include/crt/**", "include/nv/**",
                 "include/cuda/**"], allow_empty = True),
    includes = ["include"],
)

cc_library(
    name = "cudart_static",
    srcs = ["lib/libcudart_static.a"],
    linkopts = ["-ldl", "-lpthread", "-lrt"],
    deps = [":headers"],
)

cc_library(
    name = "cublaslt",
    srcs = ["lib/libcublasLt.so"],
    deps = [":headers"],
)

filegroup(name = "nvcc", srcs = ["bin/nvcc"])
"""

_BUILD_WITHOUT_CUDA = """
package(default_visibility = ["//visibility:public"])

cc_library(name = "headers")
cc_library(name = "cudart_static")
cc_library(name = "cublaslt")
filegroup(name = "nvcc", srcs = [])
"""

def _cuda_configure_impl(ctx):
    cuda_path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = ctx.path(cuda_path + "/bin/nvcc")
    enabled = nvcc.exists
    if enabled:
        ctx.symlink(cuda_path + "/include", "include")
        ctx.symlink(cuda_path + "/bin", "bin")
        lib = cuda_path + "/lib64"
        if not ctx.path(lib).exists:
            lib = cuda_path + "/lib"
        ctx.symlink(lib, "lib")
        ctx.file("BUILD", _BUILD_WITH_CUDA)
    else:
        ctx.file("BUILD", _BUILD_WITHOUT_CUDA)
    ctx.file("defs.bzl", "\n".join([
        "# Written by cuda_configure: what this machine's CUDA toolkit offers.",
        "CUDA_ENABLED = %s" % enabled,
        "CUDA_PATH = %r" % (cuda_path if enabled else ""),
        "NVCC = %r" % (str(nvcc) if enabled else ""),
        "",
    ]))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
