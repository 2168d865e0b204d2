"""The model core: cache kinds, specs, groups, layouts, the plan and capacity. Imports no family."""
