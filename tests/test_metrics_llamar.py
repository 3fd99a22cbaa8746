"""LLaMAR's metrics computed from our traces (benchmark.metrics.llamar) on real MAP-THOR
episodes: where they agree with ours, where they must differ, and the quirks of LLaMAR's checker
(coverage counts failed actions and matches substrings, balance leaves idle agents out, a put in
another of the task's receptacles is credited)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from benchmark.agents import Team, make_team
from benchmark.env import make_env
from benchmark.env.views import TaskInfo
from benchmark.metrics.episode import episode_metrics
from benchmark.metrics.llamar import llamar_metrics
from benchmark.rollout import run_episode
from benchmark.skills import object_skills

# Tasks (one per level 1, 2, 4) whose goal atoms are reached by the very actions LLaMAR's
# checker credits for them (putting in the fridge, which must be opened and closed; opening;
# switching off), where no object starts in the state its atom asks for.
DIRECT = [
    ("mapthor_put_bread_lettuce_tomato_fridge_v0", "FloorPlan1"),
    ("mapthor_open_all_drawers_v0", "FloorPlan1"),
    ("mapthor_make_livingroom_dark_v0", "FloorPlan201"),
]
TEAMS = ("oracle", "heuristic")


class Script(Team):
    """Plays a fixed list of actions per agent, then says ``done``."""

    def __init__(self, scripts: dict[str, list[str]]) -> None:
        self.scripts = scripts

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.queue = {a: list(self.scripts.get(a, [])) for a in agent_ids}

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        return {
            a: self.queue[a].pop(0) if self.queue[a] else "done"
            for a, o in observations.items()
            if o["needs_decision"]
        }


def _env(task: str, scene: str, team: str):
    observability = "full" if team in ("oracle", "script") else "partial"
    env = make_env(task, scene=scene, n_agents=2, seed=0, observability=observability)
    env.reset()
    return env


def _run(env, team: Team) -> tuple[dict, dict, dict]:
    trace = run_episode(env, team, seed=0)
    return trace, episode_metrics(trace), llamar_metrics(trace)


@pytest.fixture(scope="module")
def direct() -> dict[tuple[str, str, str], tuple[dict, dict, dict]]:
    return {
        (task, scene, team): _run(_env(task, scene, team), make_team(team))
        for task, scene in DIRECT
        for team in TEAMS
    }


def _missing(theirs: dict) -> set[str]:
    return set(theirs["subtasks"]) - set(theirs["credited"])


def test_the_oracle_succeeds_by_both_checkers_where_the_credited_action_makes_the_goal(
    direct,
) -> None:
    for task, scene in DIRECT:
        _, ours, theirs = direct[(task, scene, "oracle")]
        assert ours["SR"] == theirs["SR"] == 1.0, (task, _missing(theirs))
        assert sorted(theirs["credited"]) == sorted(theirs["subtasks"]), task
        assert ours["TR"] == theirs["TR"] == 1.0


def test_success_by_our_checker_is_success_by_llamars_on_these_tasks(direct) -> None:
    solved = [k for k, (_, ours, _) in direct.items() if ours["SR"] == 1.0]
    assert any(team == "heuristic" for _, _, team in solved)
    for key in solved:
        theirs = direct[key][2]
        assert theirs["SR"] == 1.0, (key, _missing(theirs))


def test_llamar_coverage_names_every_object_we_count_as_covered(direct) -> None:
    for key, (trace, ours, theirs) in direct.items():
        subjects = {a["subject"] for a in trace["checklist"]}
        acted = {
            r["target"]
            for r in trace["skills"]
            if r["success"] and r["skill"] in object_skills() and r["target"] in subjects
        }
        assert ours["C"] == len(acted) / len(subjects), key
        assert {theirs["names"][o] for o in acted} <= set(theirs["covered"]), key
        # Without receptacles the items are the same objects, and naming includes acting.
        if not any(a["predicate"] == "inside" for a in trace["checklist"]):
            assert theirs["C"] >= ours["C"], key
    fridge = direct[(*DIRECT[0], "oracle")][2]
    assert {"Fridge_1", "Bread_1", "Lettuce_1", "Tomato_1"} <= set(fridge["coverage_items"])


def test_llamar_balance_and_steps_follow_the_action_log(direct) -> None:
    for key, (trace, ours, theirs) in direct.items():
        done = Counter(
            r["agent"]
            for r in trace["skills"]
            if r["success"] and r["skill"] not in ("wait", "done")
        )
        assert theirs["actions"] == dict(done), key
        assert theirs["B"] == min(done.values()) / max(done.values()), key
        decisions = Counter(r["agent"] for r in trace["skills"])
        assert theirs["L"] == max(decisions.values()) <= ours["L"] + 1, key
        assert ours["L_decisions"] == sum(decisions.values())


@pytest.mark.parametrize(
    ("task", "scene", "missing"),
    [
        # Washing under a running faucet: LLaMAR's checker waits for CleanObject actions. The
        # mug is washed where it stands (in the sink) and the pot is only picked up, which is no
        # subtask of washing, so navigating to either is not credited either.
        (
            "mapthor_wash_bowl_mug_pot_pan_v0",
            "FloorPlan3",
            {
                "CleanObject(Bowl_1)",
                "CleanObject(Mug_1)",
                "CleanObject(Pot_1)",
                "CleanObject(Pan_1)",
                "NavigateTo(Mug_1)",
                "NavigateTo(Pot_1)",
            },
        ),
        # The statue reaches the sofa inside the box: nobody puts a held statue on the sofa.
        (
            "mapthor_clear_table_to_sofa_v0",
            "FloorPlan204",
            {"NavigateTo(Sofa, Statue)", "PutObject(Sofa, Statue)"},
        ),
        # The floor lamp is off from the start, so nobody switches it off.
        (
            "mapthor_make_livingroom_dark_v0",
            "FloorPlan204",
            {"NavigateTo(FloorLamp_1)", "ToggleObjectOff(FloorLamp_1)"},
        ),
    ],
)
def test_llamar_credits_actions_not_states(task: str, scene: str, missing: set[str]) -> None:
    _, ours, theirs = _run(_env(task, scene, "oracle"), make_team("oracle"))
    assert ours["SR"] == 1.0 and theirs["SR"] == 0.0
    assert _missing(theirs) == missing
    n = len(theirs["subtasks"])
    assert theirs["TR"] == (n - len(missing)) / n


def _ids(env) -> dict[str, str]:
    """Type -> objectId of the scene's first instance of each type."""
    out: dict[str, str] = {}
    for spec in env.world.specs:
        out.setdefault(spec.object_type, spec.object_id)
    return out


def test_failed_actions_count_in_llamar_coverage_and_not_in_ours() -> None:
    env = _env("mapthor_put_bread_lettuce_tomato_fridge_v0", "FloorPlan1", "script")
    ids = _ids(env)
    # Both fail: agent_0's hands are empty, and the tomato is out of agent_1's reach.
    team = Script({"agent_0": [f"put {ids['Fridge']}"], "agent_1": [f"pickup {ids['Tomato']}"]})
    trace, ours, theirs = _run(env, team)
    assert [r["success"] for r in trace["skills"] if r["target"]] == [False, False]
    assert ours["C"] == 0.0 and ours["B"] == 0.0
    assert set(theirs["covered"]) == {
        theirs["names"][ids["Fridge"]],
        theirs["names"][ids["Tomato"]],
    }
    assert theirs["C"] == 2 / len(theirs["coverage_items"]) > 0
    assert theirs["credited"] == [] and theirs["B"] is None


def test_llamar_coverage_matches_names_as_substrings() -> None:
    env = _env("mapthor_put_all_silverware_drawer_v0", "FloorPlan2", "script")
    ids = _ids(env)
    trace, ours, theirs = _run(env, Script({"agent_0": [f"navigate {ids['ButterKnife']}"]}))
    assert theirs["names"][ids["ButterKnife"]] == "ButterKnife_1"
    assert {"ButterKnife_1", "Knife_1"} <= set(theirs["covered"])
    drawers = sum(spec.object_type == "Drawer" for spec in env.world.specs)
    items = [i for i in theirs["coverage_items"] if i.startswith("Drawer_")]
    assert drawers > 1 and items == [f"Drawer_{k}" for k in range(1, drawers + 1)]
    assert ids["Knife"] not in {r["target"] for r in trace["skills"]}
    assert ours["C"] == 0.0  # navigating is not acting on an object


def test_an_idle_agent_lowers_our_balance_and_not_llamars() -> None:
    env = _env("mapthor_turn_off_faucet_light_v0", "FloorPlan1", "script")
    subjects = [a.subject for a in env.episode.checklist]
    script = [f"{verb} {s}" for s in subjects for verb in ("navigate", "toggle_off")]
    trace, ours, theirs = _run(env, Script({"agent_0": script}))
    assert [r["skill"] for r in trace["skills"] if r["agent"] == "agent_1"] == ["done"]
    assert ours["SR"] == theirs["SR"] == 1.0
    assert ours["B"] == 0.0 and ours["credited"] == [len(subjects), 0]
    assert theirs["actions"] == {"agent_0": len(script)} and theirs["B"] == 1.0


def test_acts_at_receptacles_are_credited_by_what_the_agent_holds() -> None:
    env = _env("mapthor_clear_countertop_kitchen_v0", "FloorPlan1", "script")
    ids = _ids(env)
    fork, fridge, drawer = ids["Fork"], ids["Fridge"], ids["Drawer"]
    # The drawer is opened empty-handed; the fork is carried to the fridge, which is opened,
    # closed and opened again, then put in the drawer, which is closed and opened again.
    script = [f"navigate {drawer}", f"open {drawer}", f"navigate {fork}", f"pickup {fork}"]
    script += [f"navigate {fridge}", f"open {fridge}", f"close {fridge}", f"open {fridge}"]
    script += [f"navigate {drawer}", f"put {drawer}", f"close {drawer}", f"open {drawer}"]
    trace, _, theirs = _run(env, Script({"agent_0": script}))
    assert [r["success"] for r in trace["skills"] if r["target"]] == [True] * len(script)
    credited = set(theirs["credited"])
    assert credited - set(theirs["subtasks"]) == {
        "NavigateTo(Fridge, Fork)",
        "OpenObject(Fridge, Fork)",
    }
    assert {"NavigateTo(Drawer, Fork)", "PutObject(Drawer, Fork)"} <= credited
    assert "OpenObject(Drawer, Fork)" not in credited  # never opened while holding the fork
    assert {"OpenObject(Fridge_1)", "CloseObject(Fridge_1)", "PickupObject(Fork_1)"} <= credited
    assert theirs["TR"] == len(credited) / len(theirs["subtasks"])


def test_llamar_subtasks_are_derived_from_the_checklist() -> None:
    env = _env("mapthor_clear_countertop_kitchen_v0", "FloorPlan1", "script")
    trace, _, theirs = _run(env, Script({}))
    conditional = [s for s in theirs["subtasks"] if ", " in s]
    assert sorted(conditional) == sorted(
        [f"{a}(Fridge, {t})" for t in ("Tomato", "Apple") for a in ("NavigateTo", "PutObject")]
        + [
            f"{a}(Drawer, {t})"
            for t in ("ButterKnife", "Fork")
            for a in ("NavigateTo", "PutObject", "OpenObject")
        ]
    )
    names = theirs["names"]
    for atom in trace["checklist"]:
        if atom["predicate"] == "inside":
            assert {
                f"NavigateTo({names[atom['subject']]})",
                f"PickupObject({names[atom['subject']]})",
            } <= set(theirs["subtasks"])
    assert (
        "OpenObject(Fridge_1)" in theirs["subtasks"]
        and "CloseObject(Fridge_1)" in theirs["subtasks"]
    )


def test_atoms_without_a_llamar_subtask_are_refused() -> None:
    trace = run_episode(_env(*DIRECT[0], "script"), Script({}), seed=0)
    trace["checklist"][0] = {**trace["checklist"][0], "predicate": "isCooked", "target": None}
    with pytest.raises(ValueError, match="isCooked=True has no LLaMAR subtask"):
        llamar_metrics(trace)


def test_the_command_compares_a_run_directory_and_refuses_a_broken_one(
    direct, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from benchmark.metrics.llamar import main

    (task, scene, team), (trace, ours, theirs) = next(iter(direct.items()))
    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    (run / "traces" / "one.json").write_text(json.dumps(trace))
    row = {"baseline": team, "task": task, "scene": scene, "n_agents": 2}
    (run / "episodes.jsonl").write_text(json.dumps({**row, "trace_path": "traces/one.json"}))
    assert main([str(run)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 3 and f"| {team} | {task} | {scene} |" in table[2]
    cells = [c.strip() for c in table[2].strip("|").split("|")][3:]
    assert cells[0] == f"{ours['SR']:.0f} / {theirs['SR']:.0f}"  # ours first, then LLaMAR's
    # A directory that is not a run, and a run whose trace is gone: an error naming the path,
    # and nothing printed before it.
    for broken in (tmp_path / "nowhere", run):
        if broken == run:
            (run / "traces" / "one.json").unlink()
        with pytest.raises(SystemExit) as exit_:
            main([str(broken)])
        assert exit_.value.code == 2
        out = capsys.readouterr()
        assert out.out == "" and str(broken) in out.err
