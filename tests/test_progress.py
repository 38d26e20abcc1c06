"""planner.progress: the listener of long work, and the prefix that says which part of a job runs."""

from planner.progress import SILENT, Progress, prefixed


class Recorder(Progress):
    def __init__(self):
        self.calls = []

    def stage(self, message):
        self.calls.append(("stage", message))

    def begin(self, label, total=None):
        self.calls.append(("begin", label, total))

    def advance(self, steps=1):
        self.calls.append(("advance", steps))

    def end(self):
        self.calls.append(("end",))

    def detail(self, text):
        self.calls.append(("detail", text))


def test_prefixed_names_stages_and_tasks_and_passes_the_rest_through():
    r = Recorder()
    p = prefixed(r, "bfs (2 of 3)")
    p.stage("searching")
    p.begin("cost tables", 4)
    p.advance(2)
    p.detail("half way")
    p.end()
    assert r.calls == [("stage", "bfs (2 of 3): searching"), ("begin", "bfs (2 of 3): cost tables", 4),
                       ("advance", 2), ("detail", "half way"), ("end",)]


def test_silent_stays_silent_and_ignores_details():
    assert prefixed(SILENT, "ilp (3 of 3)") is SILENT
    assert SILENT.detail("anything") is None
