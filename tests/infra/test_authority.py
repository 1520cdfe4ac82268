"""The stack's side of the trust boundary: demo job types only when asked for, and the api function's
tenant claims and admin principals from context."""

from __future__ import annotations

from offpath.jobs import is_demo
from tests.infra.stacks import EXTENDED_CONTEXT, Synthesized
from tests.infra.template_view import functions_by_name


def variables(stack: Synthesized) -> dict[str, dict[str, str]]:
    return {name: function["Environment"]["Variables"] for name, (_, function) in functions_by_name(stack.json).items()}


def test_by_default_the_stack_deploys_no_demo_job_types(default_stack: Synthesized) -> None:
    assert [name for name, jt in default_stack.registry.job_types.items() if is_demo(jt)] == []
    assert "billing.monthly_invoices" in default_stack.registry.job_types
    for name, values in variables(default_stack).items():
        assert "OFFPATH_DEMO_JOBS" not in values, name


def test_asked_for_the_demo_job_types_every_function_loads_them(extended_stack: Synthesized) -> None:
    assert "demo.echo" in extended_stack.registry.job_types
    for name, values in variables(extended_stack).items():
        assert values.get("OFFPATH_DEMO_JOBS") == "1", name


def test_by_default_only_the_tenant_claim_names_the_tenant_and_no_iam_caller_is_an_admin(
    default_stack: Synthesized,
) -> None:
    api = variables(default_stack)["offpath-api"]

    assert api["OFFPATH_TENANT_CLAIMS"] == "tenant"
    assert "OFFPATH_ADMIN_PRINCIPALS" not in api


def test_tenant_claims_and_admin_principals_reach_the_api_and_read_functions_alone(
    extended_stack: Synthesized,
) -> None:
    prefix = extended_stack.stack.options.prefix
    every = variables(extended_stack)

    for caller_facing in (f"{prefix}-api", f"{prefix}-read"):
        assert every[caller_facing]["OFFPATH_TENANT_CLAIMS"] == EXTENDED_CONTEXT["tenant_claims"]
        assert every[caller_facing]["OFFPATH_ADMIN_PRINCIPALS"] == EXTENDED_CONTEXT["admin_principals"]
    for name, values in every.items():
        if name not in (f"{prefix}-api", f"{prefix}-read"):
            assert "OFFPATH_ADMIN_PRINCIPALS" not in values, name
            assert "OFFPATH_TENANT_CLAIMS" not in values, name
