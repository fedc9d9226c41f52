"""The experiment kind `density`: how many instances of a platform one host holds while each
still does its work. kind.py the section and the run, ramp.py the count-by-count ramp, fleet.py
the instances started and measured at one count, guard.py the host's memory guard, sync.py the
shared start time inside the instances."""
