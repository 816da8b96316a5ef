"""The static files storage: whitenoise's compressed manifest, with ES module imports hashed."""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    """Serve every file under its content-hashed name, and rewrite the frame's module imports
    (`import ... from "./shared.js"`) to those names as well.

    Django rewrites JavaScript imports only when asked. Left unhashed, an import would load
    a second copy of a module a page already loaded under its hashed name, and a second copy
    of `memory.js` builds a second Memory frame on the same page.
    """

    support_js_module_import_aggregation = True
