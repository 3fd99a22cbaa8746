"""Tasks: the spec of a task file and its registry (``spec``), its parts (``parts``), goal
atoms and their checks (``goals``), the rules a goal must obey in a scene (``goal_rules``), the
episode built from a task (``episode``) and task decompositions, plans over subtasks
(``decompose``). The task files themselves are the top-level ``tasks/`` folder."""
