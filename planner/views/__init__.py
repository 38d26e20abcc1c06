"""What users look at: the summary of a sharding and the pictures of a plan.

The pictures are imported by the commands that draw them (not here, so that
``import planner`` stays light): :mod:`planner.views.html_page` (the plan page)
with :mod:`planner.views.layered_layout` (its graph drawing), :mod:`planner.views.sharding_styles`
(how layouts look) and :mod:`planner.views.panels` (its side panel),
:mod:`planner.views.svg_grid` (a sharding's device grid) and
:mod:`planner.views.charts` (bar charts), on :mod:`planner.views.svg` (SVG helpers);
:mod:`planner.views.pipeline_page` (a pipelined plan's page) with
:mod:`planner.views.pipeline_timeline` (its schedule's timeline).
The other notations of a sharding (JAX, MindSpore, DTensor) are :mod:`planner.notations`.
"""

from planner.views.summary import describe

__all__ = ["describe"]
