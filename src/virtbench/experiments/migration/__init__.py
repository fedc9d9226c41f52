"""The experiment kind `migration` (kind.py) and what it drives: N instances started and
stopped at once (fleet.py), offline migration (stop, move the storage, start: offline.py) and
live migration (QEMU through QMP; CRIU where it works: live.py), each phase timed, on this
host or to a second one (remote.py, transport.py), with the storage of both ends named
(storage.py)."""
