"""The kubernetes platform: pods on a node of a cluster the user names (platform.py)."""
