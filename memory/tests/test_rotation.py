from __future__ import annotations

from memory.models import MEMORY_PATH
from workspaces.models import FileVersion
from workspaces.services import data_keys_rewrap


def test_memory_stays_readable_during_a_rotation(tenant, settings, memory_api):
    memory_api.save("readable throughout", base=0)
    old = settings.DEPLOYMENT_KEY
    settings.DEPLOYMENT_KEY = "the new deployment key for this rotation " * 2
    settings.DEPLOYMENT_PREVIOUS_KEYS = [old]

    before_rewrap = memory_api.get().json()["content"]
    data_keys_rewrap()
    settings.DEPLOYMENT_PREVIOUS_KEYS = []

    assert before_rewrap == memory_api.get().json()["content"] == "readable throughout"
    assert FileVersion.objects.filter(file__path=MEMORY_PATH).count() == 1
