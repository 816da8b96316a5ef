"""Forms of the web frame. They validate shape only; the services decide."""

from __future__ import annotations

from django import forms


def _is_on(value: str) -> bool:
    return value == "1"


class AiConsentForm(forms.Form):
    """Switch workspace AI to `enabled`, by compare-and-set on the revision the page showed."""

    enabled = forms.TypedChoiceField(
        choices=[("1", "on"), ("0", "off")], coerce=_is_on, widget=forms.HiddenInput
    )
    expected_revision = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
