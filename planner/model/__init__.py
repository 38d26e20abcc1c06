"""The planning model: what every search decides, apart from the searches.

A model (:mod:`planner.model.build`) is one node per op, with the strategies its rule
and the user's annotations allow (:mod:`~planner.model.annotations`,
:mod:`~planner.model.manual`, :mod:`~planner.model.axis_types`), one node per shared
source tensor, and the links between them; what each link and node moves
(:mod:`~planner.model.moves`) is priced in cost tables (:mod:`~planner.model.tables`)
and handed to the searches as a plain :class:`~planner.model.problem.SearchProblem`.
A search's answer is a :class:`~planner.model.decision.Decision`.
"""
