"""`virtbench selftest`: known-answer checks of the measuring chain on the user's host."""
