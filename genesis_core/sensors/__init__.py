"""`gs.sensors`: Genesis World's sensor options (`IMU`, `Contact`, `ContactForce`, the camera sensors, and their
bases), for `scene.add_sensor(options)`. The sensors' state lives in genesis_core.sensors.manager, each kind in its
own module registered with base.register (see docs/sensors.md)."""

from .base import Sensor, register
from .kinematic import ContactForceSensor, ContactSensor, IMUData, IMUSensor
from .temperature import TemperatureGridSensor
from .manager import SensorManager
from .raycast_options import (DepthCamera, DepthCameraPattern, GridPattern, Lidar, RaycastPattern, Raycaster,
                              SphericalPattern)
from .raycaster import DepthCameraSensor, RaycasterData, RaycasterSensor
from .options import (
    IMU,
    Contact,
    ContactForce,
    NoisySensorOptionsMixin,
    RigidSensorOptionsMixin,
    SensorOptions,
    TemperatureGrid,
    TemperatureProperties,
)
from .probe_options import ElastomerDisplacement, KinematicContactProbe, KinematicTactileSensorMixin, Proximity
from .probes import (ElastomerDisplacementSensor, KinematicContactProbeData, KinematicContactProbeSensor,
                     ProximitySensor)
from ..bases import Options
from .camera import (
    BaseCameraOptions,
    BatchRendererCameraOptions,
    BatchRendererCameraSensor,
    CameraData,
    RasterizerCameraOptions,
    RasterizerCameraSensor,
    RaytracerCameraOptions,
    RaytracerCameraSensor,
)

__all__ = [
    "IMU", "Contact", "ContactForce", "ContactForceSensor", "ContactSensor", "IMUData", "IMUSensor",
    "NoisySensorOptionsMixin", "Options", "RigidSensorOptionsMixin", "Sensor", "SensorManager", "SensorOptions",
    "ElastomerDisplacement", "ElastomerDisplacementSensor", "KinematicContactProbe", "KinematicContactProbeData",
    "KinematicContactProbeSensor", "KinematicTactileSensorMixin", "Proximity", "ProximitySensor",
]
__all__ += [
    "BaseCameraOptions", "BatchRendererCameraOptions", "BatchRendererCameraSensor", "CameraData",
    "RasterizerCameraOptions", "RasterizerCameraSensor", "RaytracerCameraOptions", "RaytracerCameraSensor",
]
__all__ += [
    "TemperatureGrid", "TemperatureGridSensor", "TemperatureProperties",
    "DepthCamera", "DepthCameraPattern", "DepthCameraSensor", "GridPattern", "Lidar", "RaycastPattern", "Raycaster",
    "RaycasterData", "RaycasterSensor", "SphericalPattern",
]
