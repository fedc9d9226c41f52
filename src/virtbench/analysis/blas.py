"""numpy's OpenBLAS thread count for processes that compute statistics and do not measure.

Here, below commands/ and web/, because both set it (`report`, `serve`); it imports nothing of
numpy (the setting only takes effect before numpy loads)."""
from __future__ import annotations

import os

BLAS_THREADS = "OPENBLAS_NUM_THREADS"


def one_blas_thread() -> bool:
    """numpy's OpenBLAS with one thread in this process, unless the user chose: a report's or a
    comparison's matrix products are small, and a second thread spinning for work costs more
    CPU than it saves (a tenth of a second for a report of 100,000 samples; 47 -> 30 ms for a
    first pooled comparison in the web app). Only effective before numpy loads. True when set
    here, so the caller can keep it from processes that run benchmarks (the web's worker)."""
    if BLAS_THREADS in os.environ:
        return False
    os.environ[BLAS_THREADS] = "1"
    return True
