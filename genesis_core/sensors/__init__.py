"""`gs.sensors`: Genesis World's sensor options (`IMU`, `Contact`, `ContactForce`, and their bases), for
`scene.add_sensor(options)`. The sensors themselves and their state live in genesis_core.sensors.manager (see
docs/sensors.md)."""

from .manager import ContactForceSensor, ContactSensor, IMUData, IMUSensor, Sensor, SensorManager
from .options import (
    IMU,
    Contact,
    ContactForce,
    NoisySensorOptionsMixin,
    RigidSensorOptionsMixin,
    SensorOptions,
)
from ..bases import Options

__all__ = [
    "IMU", "Contact", "ContactForce", "ContactForceSensor", "ContactSensor", "IMUData", "IMUSensor",
    "NoisySensorOptionsMixin", "Options", "RigidSensorOptionsMixin", "Sensor", "SensorManager", "SensorOptions",
]
