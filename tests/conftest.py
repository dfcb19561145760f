"""Settings shared by every test layer."""

import os

from hypothesis import HealthCheck, settings

# Two shared cores: wall-clock deadlines would make property tests flaky, not stricter.
settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
