"""Former home of the sweep's store: now :mod:`companion.experiments.sweep`. Kept only so that
modules not yet ported (E2) import the same objects; delete once nothing imports it."""

from companion.experiments.sweep import FrozenConfig as FrozenConfig
from companion.experiments.sweep import ResultFileError as ResultFileError
from companion.experiments.sweep import ResultStore as ResultStore
from companion.experiments.sweep import UnwritablePathError as UnwritablePathError
from companion.experiments.sweep import atomic_write_json as atomic_write_json
from companion.experiments.sweep import canonical_json as canonical_json
from companion.experiments.sweep import check_writable as check_writable
from companion.experiments.sweep import config_dict as config_dict
from companion.experiments.sweep import config_hash as config_hash
from companion.experiments.sweep import read_json_file as read_json_file
