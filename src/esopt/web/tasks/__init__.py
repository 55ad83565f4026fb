"""All tasks, by site: seeded templates over each site's seeded data."""

from __future__ import annotations

import functools
import importlib
import random
import zlib

from esopt.web.sites import SITES, site_module
from esopt.web.task import Task

SPLITS = ("all", "train", "test")
FAMILIES = ("full", "short")
"""full: the standard tasks (2-7 actions); short: one or two actions from the start page
(`esopt.web.tasks.short`)."""
PER_TEMPLATE = 5
"""Instances per task template (7-8 templates a site: 37 templates, 185 tasks)."""


def check_family(family: str) -> None:
    """A ValueError unless `family` names a task family."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")


@functools.lru_cache(maxsize=16)
def site_tasks(site: str, data_seed: int = 0, family: str = "full") -> tuple[Task, ...]:
    """The tasks of one site's family over the data of `data_seed`, in a fixed order."""
    check_family(family)
    data = site_module(site).generate(data_seed)
    if family == "short":
        from esopt.web.tasks.short import make_tasks

        return tuple(make_tasks(site, data))
    module = importlib.import_module(f"esopt.web.tasks.{site}")
    return tuple(module.make_tasks(data, random.Random(f"tasks:{site}:{data_seed}"),
                                   PER_TEMPLATE))


def in_split(task: Task, split: str) -> bool:
    """Whether the task belongs to the split: test = a fixed quarter, by a hash of its id."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if split == "all":
        return True
    is_test = zlib.crc32(task.id.encode()) % 4 == 0
    return is_test if split == "test" else not is_test


def all_tasks(data_seed: int = 0, sites: tuple[str, ...] = SITES,
              split: str = "all", family: str = "full") -> tuple[Task, ...]:
    """The tasks of a split of the given sites in a fixed order that takes the sites in
    turn, each site's tasks shuffled (seeded): any first N tasks (an evaluation of N tasks)
    span the sites and the task templates."""
    queues = []
    for site in sites:
        tasks = [t for t in site_tasks(site, data_seed, family) if in_split(t, split)]
        random.Random(f"order:{site}:{data_seed}").shuffle(tasks)
        queues.append(tasks)
    order = []
    while any(queues):
        for queue in queues:
            if queue:
                order.append(queue.pop(0))
    return tuple(order)
