"""Devices: one interface (:mod:`.base`), two backends (:mod:`.cuda`, :mod:`.cpu`)."""
from .base import Device, Event, Stream
from .cpu import CPUDevice
from .cuda import CUDADevice, cuda_device_count

__all__ = ["Device", "Event", "Stream", "CPUDevice", "CUDADevice", "cuda_device_count"]
