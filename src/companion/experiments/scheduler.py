"""Former home of the sweep's scheduler: now :mod:`companion.experiments.sweep`. Kept only so
that modules not yet ported (E2) import the same objects; delete once nothing imports it."""

from companion.experiments.sweep import DaskMissingError as DaskMissingError
from companion.experiments.sweep import SchedulerUnreachableError as SchedulerUnreachableError
from companion.experiments.sweep import Unit as Unit
from companion.experiments.sweep import environment as environment
from companion.experiments.sweep import parse_scheduler as parse_scheduler
from companion.experiments.sweep import run_units as run_units
