from __future__ import annotations

import uuid

import pytest
from django.apps import apps
from django.db import models
from django.utils import timezone

from conftest import violates
from memory.models import LineProvenance, LineReview, MemoryPolicy, Proposal


@pytest.fixture
def policy(tenant) -> MemoryPolicy:
    return MemoryPolicy.objects.create(workspace=tenant.workspace)


@pytest.mark.parametrize(
    ("constraint", "change"),
    [
        ("memory_memorypolicy_mode_valid", {"mode": "sometimes"}),
        ("memory_memorypolicy_revision_non_negative", {"policy_revision": -1}),
        ("memory_memorypolicy_generation_non_negative", {"clear_generation": -1}),
    ],
)
def test_policy_constraints_refuse_bad_rows(policy, constraint, change):
    violates(constraint, lambda: MemoryPolicy.objects.filter(pk=policy.pk).update(**change))


@pytest.fixture
def proposal(tenant) -> Proposal:
    return Proposal.objects.create(
        workspace=tenant.workspace,
        admission_id=uuid.uuid4(),
        changes_ciphertext=b"sealed",
        base_version=1,
        clear_generation=0,
        reason="read_only",
    )


@pytest.mark.parametrize(
    ("constraint", "change"),
    [
        ("memory_proposal_status_valid", {"status": "maybe", "resolved_at": timezone.now()}),
        ("memory_proposal_reason_valid", {"reason": "whim"}),
        ("memory_proposal_resolved_iff_closed", {"status": "applied"}),
        ("memory_proposal_resolved_iff_closed", {"resolved_at": timezone.now()}),
        ("memory_proposal_versions_non_negative", {"base_version": -1}),
        ("memory_proposal_versions_non_negative", {"clear_generation": -1}),
        ("memory_proposal_flagged_names_rules", {"reason": "instruction_flagged"}),
    ],
)
def test_proposal_constraints_refuse_bad_rows(proposal, constraint, change):
    violates(constraint, lambda: Proposal.objects.filter(pk=proposal.pk).update(**change))


def test_a_cached_line_count_cannot_be_negative(memory_revision):
    violates(
        "memory_lineprovenance_line_count_non_negative",
        lambda: LineProvenance.objects.create(
            revision=memory_revision, line_count=-1, origin_runs=[]
        ),
    )


@pytest.mark.parametrize(
    ("constraint", "change"),
    [
        ("memory_linereview_origin_line_non_negative", {"origin_line": -1}),
        ("memory_linereview_version_positive", {"reviewed_version": 0}),
    ],
)
def test_line_review_constraints_refuse_bad_rows(tenant, memory_revision, constraint, change):
    review = LineReview.objects.create(
        workspace=tenant.workspace, origin=memory_revision, origin_line=0, reviewed_version=1
    )

    violates(constraint, lambda: LineReview.objects.filter(pk=review.pk).update(**change))


def test_a_flagged_proposal_naming_a_rule_is_a_valid_row(proposal):
    Proposal.objects.filter(pk=proposal.pk).update(
        reason="instruction_flagged", flagged_rules=["exfiltration"]
    )

    proposal.refresh_from_db()
    assert (proposal.reason, proposal.flagged_rules) == ("instruction_flagged", ["exfiltration"])


def test_every_check_constraint_of_this_app_is_tested_above():
    declared = {
        constraint.name
        for model in apps.get_app_config("memory").get_models()
        for constraint in model._meta.constraints
        if isinstance(constraint, models.CheckConstraint)
    }

    assert declared == {
        "memory_memorypolicy_mode_valid",
        "memory_memorypolicy_revision_non_negative",
        "memory_memorypolicy_generation_non_negative",
        "memory_proposal_status_valid",
        "memory_proposal_reason_valid",
        "memory_proposal_resolved_iff_closed",
        "memory_proposal_versions_non_negative",
        "memory_lineprovenance_line_count_non_negative",
        "memory_linereview_origin_line_non_negative",
        "memory_linereview_version_positive",
        "memory_proposal_flagged_names_rules",
        # Memory spaces' constraints: memory/tests/spaces/test_models.py.
        "memory_memoryspace_visibility_valid",
        "memory_memoryspace_tenant_iff_not_global",
        "memory_memoryspace_user_iff_user_bound",
        "memory_memoryspace_used_non_negative",
        "memory_memoryspace_deleted_revision_non_negative",
        "memory_spacedocument_revision_positive",
        "memory_spacedocument_size_non_negative",
        "memory_spacedocument_updated_by_present",
        "memory_tenantspaceusage_used_non_negative",
        "memory_tenantspaceusage_quota_override_non_negative",
        "memory_spacekey_wrapping_key_id_valid",
    }
