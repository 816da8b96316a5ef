"""The frame's ES modules, as collectstatic serves them in production."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from django.utils.module_loading import import_string

from memory_project import settings as project_settings

MODULE_IMPORT = re.compile(r'\bfrom "(\.\.?/[^"]+)"')


def test_collected_modules_import_each_other_by_their_hashed_names(tmp_path: Path) -> None:
    # The suite swaps the storage for the plain one: take the one the project serves with.
    storage_class = import_string(project_settings.STORAGES["staticfiles"]["BACKEND"])
    storage = storage_class(location=tmp_path)
    source = FileSystemStorage(location=Path(settings.BASE_DIR) / "static")
    # The frame's modules and the vendored ones they import (`../vendor/...`).
    modules = [
        f"{folder}/{name}"
        for folder in ("js", "vendor")
        for name in source.listdir(folder)[1]
        if name.endswith(".js")
    ]
    for name in modules:
        with source.open(name) as content:
            storage.save(name, content)

    for _ in storage.post_process({name: (source, name) for name in modules}):
        pass

    served = {storage.stored_name(name) for name in modules}
    imports = {
        posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
        for name in served
        for target in MODULE_IMPORT.findall(storage.open(name).read().decode())
    }
    assert "js/shared.js" in modules
    assert imports, "no module imports another: nothing was checked"
    # An unhashed import would load a second copy of a module the page loaded by its
    # hashed name (a second Memory frame on one page).
    assert imports <= served, imports - served
