"""fuzz_test: the short run of one fuzz target under `bazel test` (gcc; --config=asan too).

<name>_fuzz.c, which defines LLVMFuzzerTestOneInput, is linked with replay_main.c and runs
every file of corpus/<name>/ and regressions/<name>/, then deterministic mutations of them
(replay_main.c says which). fuzz/build_libfuzzer.sh builds the same file with libFuzzer.
"""

load("//tools/bazel:warnings.bzl", "GEMMD_COPTS")

def fuzz_test(name, deps, mutations = 5000):
    native.cc_test(
        name = name + "_fuzz_test",
        size = "small",
        srcs = [name + "_fuzz.c"],
        copts = GEMMD_COPTS,
        args = [
            "--mutations=%d" % mutations,
            "fuzz/corpus/" + name,
            "fuzz/regressions/" + name,
        ],
        data = native.glob(["corpus/%s/*" % name, "regressions/%s/*" % name]),
        deps = deps + [":replay_main", ":fuzz_util"],
    )
