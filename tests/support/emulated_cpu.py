"""An older x86-64 CPU emulated on this one, for a subprocess: everything that picks code by CPU
feature is switched off (tests/test_cpu_determinism.py; the ``fresh_install`` fixture of
tests/conftest.py builds and runs on it).

numpy's SIMD dispatch (``NPY_DISABLE_CPU_FEATURES``), glibc's libm variants (``GLIBC_TUNABLES``
hwcaps: the FMA/AVX2 versions of exp, log, pow, lgamma), OpenBLAS's kernel (``OPENBLAS_CORETYPE``)
and numba's code generation (``NUMBA_CPU_NAME=x86-64``, baseline SSE2; numba keys its cache
entries by CPU name, so these kernels never mix with the host's). On a CPU that lacks AVX-512
the numpy switch changes nothing, but the libm, BLAS and numba switches still emulate a
different machine.
"""

BASELINE_CPU = {
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX,-AVX512F",
    "OPENBLAS_CORETYPE": "Nehalem",
    "NUMBA_CPU_NAME": "x86-64",
}
