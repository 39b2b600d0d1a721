"""The engine's shared properties on this package's test scenes (those `genesis_springs.plugin` registers with
`register_test_scenes`): get_state/reset and checkpoint round trips bitwise (also resumed in a fresh process),
"snapshot, step N, restore, step N" determinism, reset with envs_idx leaving the other environments untouched,
and a pickled state passed back to reset, over random n_envs, step counts and envs_idx subsets."""

import genesis_springs.plugin
from genesis_core.testing import property_tests

TestSpringChainProperties = property_tests(genesis_springs.plugin)
