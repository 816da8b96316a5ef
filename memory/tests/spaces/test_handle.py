"""The space handle's id: equal handles give equal ids, and any change of any axis gives
another id, whatever the segments hold (`:` and `%` included)."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from memory.spaces.handle import (
    REQUIRED_QUALIFIERS,
    USER_BOUND,
    SpaceHandle,
    Visibility,
    space_handle_parse,
)

segments = st.text(min_size=1, max_size=12).filter(
    lambda text: "/" not in text and "\\" not in text and text not in {".", ".."}
)
plain_segments = st.from_regex(r"[A-Za-z0-9._-]{1,12}", fullmatch=True).filter(
    lambda text: text not in {".", ".."}
)
ids = st.one_of(st.none(), st.integers(min_value=1, max_value=10**6))


@st.composite
def handles(draw: st.DrawFn) -> SpaceHandle:
    return SpaceHandle(
        visibility=draw(st.sampled_from(Visibility)),
        name=draw(segments),
        tenant_id=draw(ids),
        project=draw(st.one_of(st.just(""), segments)),
        bot=draw(st.one_of(st.just(""), segments)),
        user_id=draw(ids),
        run=draw(st.one_of(st.just(""), segments)),
    )


@given(handles())
def test_equal_handles_give_equal_ids(handle):
    assert dataclasses.replace(handle).id == handle.id


@given(handles(), handles())
def test_different_handles_give_different_ids(first, second):
    assert (first.id == second.id) == (first == second)


@given(handles(), st.sampled_from(["name", "project", "bot", "run"]), segments)
def test_changing_one_text_axis_changes_the_id(handle, axis, value):
    changed = dataclasses.replace(handle, **{axis: value})
    assert (changed.id == handle.id) == (getattr(handle, axis) == value)


def test_a_colon_inside_a_segment_cannot_pose_as_an_axis_boundary():
    joined = SpaceHandle(visibility=Visibility.BOT, name="n", tenant_id=1, project="a:", bot="b")
    split = SpaceHandle(visibility=Visibility.BOT, name="n", tenant_id=1, project="a", bot=":b")
    assert joined.id != split.id


@given(st.sampled_from(Visibility), plain_segments, st.integers(min_value=1, max_value=99))
def test_the_parsed_handle_takes_tenant_and_user_from_the_caller_only(visibility, name, caller):
    query = {"visibility": visibility.value, "name": name}
    query.update({qualifier: "q" for qualifier in REQUIRED_QUALIFIERS[visibility]})

    handle = space_handle_parse(query, tenant_id=7, user_id=caller)

    assert handle.tenant_id == (None if visibility is Visibility.GLOBAL else 7)
    assert handle.user_id == (caller if visibility in USER_BOUND else None)
    other_tenant = space_handle_parse(query, tenant_id=8, user_id=caller)
    assert (other_tenant.id == handle.id) == (visibility is Visibility.GLOBAL)
