"""Lifecycle at scale and migration: N instances started and stopped at once, offline
migration (stop, move the storage, start) and live migration (QEMU through QMP; CRIU where
it works), each phase timed. The experiment kind `migration` drives these; they sit above
the platforms and below the runner's store."""
