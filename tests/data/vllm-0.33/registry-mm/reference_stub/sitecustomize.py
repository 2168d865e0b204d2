# Reference runs only (not part of kvviz): torchvision's wheel here is a CUDA build whose _C ops cannot
# load on this CPU torch; its meta registrations of those ops (never used by the KV cache planner) are stubbed.
import sys
import types

sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
