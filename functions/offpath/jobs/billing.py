"""Monthly billing on the 1st at 06:00 Prague time. Each customer is charged at most once per month,
however often the job runs or the schedule fires: the charge is guarded by an across-jobs `ctx.once`.
Only its schedule submits it (`submitted_by="system"`; an admin can fire the schedule now), so its
marks are the deployment's, not some tenant's."""

from __future__ import annotations

import logging
from typing import Protocol

from pydantic import BaseModel, Field

from offpath.domain.context import JobContext
from offpath.domain.cron import load_zone
from offpath.domain.registry import job, schedule

BILLING_ZONE = "Europe/Prague"


# A monthly charge per customer: at least one cent (a zero charge would use up the month's mark), at most
# 1,000.00. Raise the cap here if your prices need it.
MAX_AMOUNT_CENTS = 100_000


class MonthlyBillingPayload(BaseModel):
    amount_cents: int = Field(default=1900, ge=1, le=MAX_AMOUNT_CENTS)


class CustomerDirectory(Protocol):
    def billable_customers(self) -> list[str]: ...


class PaymentGateway(Protocol):
    def charge(self, customer_id: str, amount_cents: int, reference: str) -> str: ...


class DemoCustomerDirectoryStub:
    """STAND-IN: three demo customers. Replace with a query of your customer database."""

    def billable_customers(self) -> list[str]:
        return ["customer-1", "customer-2", "customer-3"]


class LoggingPaymentGatewayStub:
    """STAND-IN: records and logs charges instead of making them. Replace with your payment provider."""

    def __init__(self) -> None:
        self.charges: list[tuple[str, int, str]] = []

    def charge(self, customer_id: str, amount_cents: int, reference: str) -> str:
        self.charges.append((customer_id, amount_cents, reference))
        logging.getLogger("offpath.billing.stub").info("stub payment gateway: no money moved")
        return f"stub-charge-{len(self.charges)}"


customers: CustomerDirectory = DemoCustomerDirectoryStub()
payments: PaymentGateway = LoggingPaymentGatewayStub()


@job(
    "billing.monthly_invoices",
    payload=MonthlyBillingPayload,
    queue="critical",
    max_attempts=5,
    timeout_s=120,
    submitted_by="system",
)
def monthly_invoices(payload: MonthlyBillingPayload, ctx: JobContext) -> dict[str, object]:
    month = ctx.created_at.astimezone(load_zone(BILLING_ZONE)).strftime("%Y-%m")
    charged, already = [], []
    customer_ids = customers.billable_customers()
    for index, customer_id in enumerate(customer_ids):
        reference = f"invoice:{customer_id}:{month}"
        if ctx.once(f"charge:{customer_id}:{month}", across_jobs=True):
            payments.charge(customer_id, payload.amount_cents, reference)
            charged.append(customer_id)
        else:
            already.append(customer_id)
        ctx.progress((index + 1) / len(customer_ids), f"billed {index + 1} of {len(customer_ids)}")
    return {"month": month, "charged": charged, "already_charged": already}


schedule(
    "monthly-billing",
    cron="0 6 1 * ? *",
    timezone=BILLING_ZONE,
    job="billing.monthly_invoices",
    overlap="skip",
)
