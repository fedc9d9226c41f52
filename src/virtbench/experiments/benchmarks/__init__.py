"""The built-in kind `benchmarks`: every benchmark on every platform, in interleaved rounds."""
