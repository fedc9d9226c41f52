"""CLI commands, one module each (registered in cli.py with one add_command line)."""
