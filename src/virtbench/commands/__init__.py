"""CLI commands in their own modules, each registered in cli.py with one add_command line."""
