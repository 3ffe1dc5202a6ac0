"""Suite-wide settings.

Under CI (``CI`` set) hypothesis runs derandomized, so a landing never hinges
on a lucky draw; developers' runs stay random and keep exploring.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
