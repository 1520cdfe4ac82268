"""The embedded runtime's alarm evaluator marks a change of an alarm whose actions are disabled (a paused queue
class's age alarm), and the runtime does not announce it: as on AWS, where such a change sends no notification."""

from __future__ import annotations

from typing import Any

from offpath_local.alarms import AlarmEvaluator, EventCounts, announced
from offpath_local.resources import AlarmSpec


class FakeCloudWatch:
    def __init__(self, actions_enabled: dict[str, bool]) -> None:
        self.actions_enabled = actions_enabled
        self.states: dict[str, str] = {}

    def set_alarm_state(self, **request: Any) -> None:
        self.states[request["AlarmName"]] = request["StateValue"]

    def describe_alarms(self, AlarmNames: list[str]) -> dict[str, Any]:
        return {"MetricAlarms": [{"AlarmName": n, "ActionsEnabled": self.actions_enabled[n]} for n in AlarmNames]}

    def put_metric_data(self, **request: Any) -> None:
        pass


class NoQueues:
    def depths(self, urls: list[str]) -> dict[str, Any]:
        return {}


def spec(name: str) -> AlarmSpec:
    return AlarmSpec(name, "about it", 1, "Offpath", "WorkerErrors", (), "events", event=f"{name}-event")


def test_a_change_of_an_alarm_whose_actions_are_disabled_is_marked() -> None:
    cloudwatch = FakeCloudWatch({"offpath-default-oldest-message-age": False, "offpath-api-5xx": True})
    events = EventCounts()
    changes: list[dict[str, Any]] = []
    evaluator = AlarmEvaluator(
        cloudwatch=cloudwatch,
        peek=NoQueues(),  # type: ignore[arg-type]
        queue_urls=[],
        specs=[spec("offpath-default-oldest-message-age"), spec("offpath-api-5xx")],
        events=events,
        on_change=changes.append,
    )
    events.add("offpath-default-oldest-message-age-event")
    events.add("offpath-api-5xx-event")

    evaluator.evaluate()

    assert cloudwatch.states == {"offpath-default-oldest-message-age": "ALARM", "offpath-api-5xx": "ALARM"}
    assert {c["alarm"]: c["actions_enabled"] for c in changes} == {
        "offpath-default-oldest-message-age": False,
        "offpath-api-5xx": True,
    }

    assert [announced(c) for c in changes] == [False, True], "the paused queue's alarm is not announced"
