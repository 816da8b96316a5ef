"""The project's own configuration of Django's apps."""

from django.contrib.admin.apps import AdminConfig


class MemoryAdminConfig(AdminConfig):
    """Django's admin, served by `MemoryAdminSite` (its module says why)."""

    default_site = "memory_project.admin_site.MemoryAdminSite"
