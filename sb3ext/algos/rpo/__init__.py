from sb3ext.algos.rpo.policies import CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3ext.algos.rpo.rpo import RPO

__all__ = ["RPO", "CnnPolicy", "MlpPolicy", "MultiInputPolicy"]
