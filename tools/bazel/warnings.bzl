"""Compiler flags for the project's own C and C++ code, in one place."""

# C11 with every warning an error. Third-party and generated code does not use these.
C_WARNINGS = [
    "-std=c11",
    "-D_GNU_SOURCE",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wshadow",
    "-Wstrict-prototypes",
    "-Wmissing-prototypes",
    "-Wno-unused-parameter",
    # gemmd_log(level, msg, "") logs a message without key=value pairs.
    "-Wno-format-zero-length",
]

CXX_WARNINGS = [
    "-std=c++17",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",
]

# Optimisation for everything the daemon runs; tests use it too so that they time the
# code that ships.
OPT = ["-O2", "-g"]

GEMMD_COPTS = C_WARNINGS + OPT
GEMMD_CXXOPTS = CXX_WARNINGS + OPT
