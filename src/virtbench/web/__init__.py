"""The web app: schedule and watch campaigns, verify raw measurements, compare platforms.

`virtbench serve` runs it (FastAPI + server-rendered Jinja2 pages, no external resources);
`virtbench worker` executes what it schedules. See app.py for the layout.
"""
