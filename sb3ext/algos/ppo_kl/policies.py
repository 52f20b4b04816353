# This file is here just to define MlpPolicy/CnnPolicy that work for KLPPO
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
