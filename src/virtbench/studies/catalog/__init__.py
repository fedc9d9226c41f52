"""The five studies as data, one module each, read against their seeds line by line."""
from __future__ import annotations

from ..model import Study
from . import s000, s001, s002, s003, s004

STUDIES: tuple[Study, ...] = (s000.STUDY, s001.STUDY, s002.STUDY, s003.STUDY, s004.STUDY)
