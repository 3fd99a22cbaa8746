"""Object state changes: toggling, slicing, cooking, breaking, cleaning, liquids, using up.

Heat, cold and running water act on what objects hold; :func:`settle` applies them after every
action that can change what rests where or what is switched on.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from benchmark.sim.facts import Transformation
from benchmark.sim.failures import Failure
from benchmark.sim.scene import ObjState, spec_from_record
from benchmark.sim.world import OK, ActionResult, World, failed, find_target

LIQUIDS = ("coffee", "wine", "water")
BASINS = ("SinkBasin", "BathtubBasin")  # what a running faucet fills and washes
FAUCET_REACH = 1.0  # metres from a faucet to the basin it fills


def heat_is_on(world: World, index: int) -> bool:
    """Whether a heat source is switched on: by itself, or (a StoveBurner) by its knob."""
    spec = world.specs[index]
    if spec.toggleable:
        return world.objs[index].is_toggled
    return any(
        world.objs[k].is_toggled and index in world.specs[k].controlled for k in _knobs(world)
    )


def _knobs(world: World) -> list[int]:
    return [s.index for s in world.specs if s.controlled]


def basin_of(world: World, faucet: int) -> int:
    """The basin (SinkBasin, BathtubBasin) a faucet's running water reaches: the nearest
    within ``FAUCET_REACH`` metres (-1: none)."""
    fx, _, fz = world.position(faucet)
    best, best_d = -1, FAUCET_REACH
    for s in world.specs:
        if s.object_type in BASINS and world.objs[s.index].active:
            x, _, z = world.position(s.index)
            d = math.hypot(x - fx, z - fz)
            if d < best_d:
                best, best_d = s.index, d
    return best


def settle(world: World) -> None:
    """Apply heat, cold, brewing and running water to the objects they act on."""
    children = world.children()
    for spec in world.specs:
        k = spec.index
        st = world.objs[k]
        if not st.active:
            continue
        if spec.is_heat_source and heat_is_on(world, k):
            for d in world.descendants(k, children):
                ds, dst = world.specs[d], world.objs[d]
                if ds.cookable and not dst.is_cooked:
                    world.update(d, is_cooked=True, temperature="Hot")
                if (
                    spec.object_type == "CoffeeMachine"
                    and ds.can_fill
                    and not dst.is_filled
                    and not dst.is_broken
                ):
                    world.update(d, is_filled=True, fill_liquid="coffee", temperature="Hot")
        elif spec.is_cold_source:
            for d in world.descendants(k, children):
                if world.objs[d].temperature != "Cold":
                    world.update(d, temperature="Cold")
        elif spec.object_type == "Faucet" and st.is_toggled:
            basin = basin_of(world, k)
            for d in world.descendants(basin, children) if basin >= 0 else ():
                ds, dst = world.specs[d], world.objs[d]
                if ds.dirtyable and dst.is_dirty:
                    world.update(d, is_dirty=False)
                if ds.can_fill and not dst.is_filled and not dst.is_broken:
                    world.update(d, is_filled=True, fill_liquid="water")


def toggle(
    world: World, a: int, action: str, objectId: str, forceAction: bool = False
) -> ActionResult:
    index, fail = find_target(world, a, action, objectId, forceAction, allow_held=True)
    if fail:
        return fail
    if not world.specs[index].toggleable:
        return failed(Failure.INCAPABLE, f"{action} failed: {objectId} is not toggleable")
    on = action == "ToggleObjectOn"
    st = world.objs[index]
    if st.is_toggled == on:
        return failed(
            Failure.ALREADY, f"{action} failed: {objectId} is already {'on' if on else 'off'}"
        )
    if st.is_broken:
        return failed(Failure.BROKEN, f"{action} failed: {objectId} is broken")
    world.update(index, is_toggled=on)
    settle(world)
    return OK


def _pieces(world: World, index: int, change: Transformation, created: str) -> None:
    """Replace object ``index`` by ``change.count`` pieces of type ``change.into``.

    Pieces share the original's receptacle and split its box along the longer horizontal axis.
    """
    spec, st = world.specs[index], world.objs[index]
    facts = world.facts.derived_types.get(change.into, {})
    x0, x1, y0, y1, z0, z1 = world.box(index)
    along_x = (x1 - x0) >= (z1 - z0)
    n = change.count
    for k in range(n):
        if along_x:
            bx0, bx1, bz0, bz1 = x0 + (x1 - x0) * k / n, x0 + (x1 - x0) * (k + 1) / n, z0, z1
        else:
            bx0, bx1, bz0, bz1 = x0, x1, z0 + (z1 - z0) * k / n, z0 + (z1 - z0) * (k + 1) / n
        cx, cy, cz = (bx0 + bx1) / 2, (y0 + y1) / 2, (bz0 + bz1) / 2
        size = {"x": bx1 - bx0, "y": y1 - y0, "z": bz1 - bz0}
        record = dict(spec.record)
        record.update(
            {
                "objectId": f"{spec.object_id}|{change.into}_{k}",
                "objectType": change.into,
                "name": f"{change.into}_{k}_{created}",
                "assetId": "",
                "pickupable": bool(facts.get("pickupable", True)),
                "cookable": bool(facts.get("cookable", False)),
                "salientMaterials": list(facts.get("salientMaterials", ["Food"])),
                "mass": float(record.get("mass") or 0.0) / n,
                "position": {"x": cx, "y": y0, "z": cz},
                "axisAlignedBoundingBox": {"center": {"x": cx, "y": cy, "z": cz}, "size": size},
            }
        )
        for flag in (
            "receptacle",
            "openable",
            "toggleable",
            "sliceable",
            "breakable",
            "dirtyable",
            "canFillWithLiquid",
            "canBeUsedUp",
            "isHeatSource",
            "isColdSource",
            "moveable",
        ):
            record[flag] = False
        record["controlledObjects"] = None
        new_spec = spec_from_record(len(world.specs), record, source=index)
        world.add_object(
            new_spec,
            ObjState(
                x=cx,
                y=y0,
                z=cz,
                parent=st.parent,
                holder=-1,
                is_open=False,
                openness=0.0,
                is_toggled=False,
                is_sliced=False,
                is_cooked=st.is_cooked,
                is_broken=False,
                is_dirty=False,
                is_filled=False,
                fill_liquid=None,
                is_used_up=False,
                temperature=st.temperature,
                active=True,
            ),
        )
    world.update(index, parent=-1, active=False)


def slice_object(
    world: World, a: int, action: str, objectId: str, forceAction: bool = False
) -> ActionResult:
    agent = world.agents[a]
    tools = world.facts.slicing_tools
    if agent.held < 0 or world.specs[agent.held].object_type not in tools:
        return failed(
            Failure.NEEDS_TOOL,
            f"{action} failed: the agent must hold one of {sorted(tools)} to slice",
        )
    index, fail = find_target(world, a, action, objectId, forceAction, allow_held=False)
    if fail:
        return fail
    spec = world.specs[index]
    if not spec.sliceable:
        return failed(Failure.INCAPABLE, f"{action} failed: {objectId} is not sliceable")
    if world.objs[index].is_sliced:
        return failed(Failure.ALREADY, f"{action} failed: {objectId} is already sliced")
    world.update(index, is_sliced=True)
    change = world.facts.slicing.get(spec.object_type)
    if change is not None:
        _pieces(world, index, change, f"t{world.tick}")
    return OK


class FlagChange(NamedTuple):
    """An action that flips one state flag of an object that has a capability."""

    capability: str  # ObjectSpec field the object needs
    field: str  # ObjState field the action sets
    value: bool  # the value it sets
    incapable: str  # how the failure names a missing capability
    already: str  # how the failure names the state it is already in
    updates: dict[str, Any]  # every ObjState field the action sets


FLAG_CHANGES = {
    "CookObject": FlagChange(
        "cookable",
        "is_cooked",
        True,
        "cannot be cooked",
        "cooked",
        {"is_cooked": True, "temperature": "Hot"},
    ),
    "BreakObject": FlagChange(
        "breakable",
        "is_broken",
        True,
        "cannot be broken",
        "broken",
        {"is_broken": True, "is_filled": False, "fill_liquid": None},
    ),
    "CleanObject": FlagChange(
        "dirtyable", "is_dirty", False, "cannot be cleaned", "clean", {"is_dirty": False}
    ),
    "DirtyObject": FlagChange(
        "dirtyable", "is_dirty", True, "cannot get dirty", "dirty", {"is_dirty": True}
    ),
    "FillObjectWithLiquid": FlagChange(
        "can_fill", "is_filled", True, "cannot hold liquid", "filled", {"is_filled": True}
    ),
    "EmptyLiquidFromObject": FlagChange(
        "can_fill",
        "is_filled",
        False,
        "cannot hold liquid",
        "empty",
        {"is_filled": False, "fill_liquid": None},
    ),
    "UseUpObject": FlagChange(
        "can_be_used_up", "is_used_up", True, "cannot be used up", "used up", {"is_used_up": True}
    ),
}


def _flag_target(
    world: World, a: int, action: str, objectId: str, forceAction: bool
) -> tuple[int, ActionResult]:
    """Resolve the target of a :data:`FLAG_CHANGES` action; (-1, failure) if impossible."""
    change = FLAG_CHANGES[action]
    index, fail = find_target(world, a, action, objectId, forceAction, allow_held=True)
    if fail:
        return -1, fail
    if not getattr(world.specs[index], change.capability):
        return -1, failed(Failure.INCAPABLE, f"{action} failed: {objectId} {change.incapable}")
    if getattr(world.objs[index], change.field) == change.value:
        return -1, failed(
            Failure.ALREADY, f"{action} failed: {objectId} is already {change.already}"
        )
    return index, OK


def set_flag(
    world: World, a: int, action: str, objectId: str, forceAction: bool = False
) -> ActionResult:
    """Cook, clean, dirty, empty or use up an object (see :data:`FLAG_CHANGES`)."""
    index, result = _flag_target(world, a, action, objectId, forceAction)
    if index >= 0:
        world.update(index, **FLAG_CHANGES[action].updates)
    return result


def break_object(
    world: World, a: int, action: str, objectId: str, forceAction: bool = False
) -> ActionResult:
    index, result = _flag_target(world, a, action, objectId, forceAction)
    if index < 0:
        return result
    world.update(index, **FLAG_CHANGES[action].updates)
    change = world.facts.breaking.get(world.specs[index].object_type)
    if change is not None:
        if world.carrier(index) == a:
            agent = world.agents[a]
            world.update(index, holder=-1)
            world.move_agent(a, agent._replace(held=-1))
        _pieces(world, index, change, f"t{world.tick}")
    return OK


def fill(
    world: World, a: int, action: str, objectId: str, fillLiquid: str, forceAction: bool = False
) -> ActionResult:
    if fillLiquid not in LIQUIDS:
        raise ValueError(f"{action}: fillLiquid={fillLiquid!r} is not one of {list(LIQUIDS)}")
    index, result = _flag_target(world, a, action, objectId, forceAction)
    if index < 0:
        return result
    if world.objs[index].is_broken:
        return failed(Failure.BROKEN, f"{action} failed: {objectId} is broken")
    world.update(index, is_filled=True, fill_liquid=fillLiquid)
    return OK
