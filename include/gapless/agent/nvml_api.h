// The part of NVIDIA's Management Library (NVML) C API that gapless-agent calls, declared here
// from NVIDIA's public API reference (docs.nvidia.com/deploy/nvml-api) so the project builds
// without the CUDA toolkit and never links libnvidia-ml at build time: the agent dlopen()s the
// library at run time (nvml_library.h) and tests load a fake with the same symbols
// (tests/fake_nvml/).
//
// Only what the agent uses is here. Structs and enum values must match the driver's ABI
// exactly; each is written as the reference documents it. Everything is plain C (extern "C"
// linkage, no namespaces) because these are the symbols the shared library exports.
#pragma once

#include <cstddef>

extern "C" {

// Return codes (nvmlReturn_t). Values as documented; unlisted ones are reported by number.
typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,      // nvmlEventSetWait: no event within the timeout
  NVML_ERROR_GPU_IS_LOST = 15,  // the GPU fell off the bus or stopped answering
  NVML_ERROR_IN_USE = 19,       // e.g. destroying a MIG instance that processes still use
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,  // e.g. a MIG placement that overlaps an instance
  NVML_ERROR_UNKNOWN = 999,
} nvmlReturn_t;

typedef struct nvmlDevice_st* nvmlDevice_t;            // opaque, owned by the library
typedef struct nvmlEventSet_st* nvmlEventSet_t;        // opaque; nvmlEventSetFree releases it
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;  // opaque MIG GPU instance
typedef struct nvmlComputeInstance_st* nvmlComputeInstance_t;  // opaque MIG compute instance

typedef enum nvmlEnableState_enum {
  NVML_FEATURE_DISABLED = 0,
  NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

// nvmlDeviceGetNvLinkRemoteDeviceType: what sits at the far end of a link. On NVSwitch systems
// whose switches are not PCI functions of the host, a switch port has no remote PCI info, and
// only this tells it from a dead end.
typedef enum nvmlIntNvLinkDeviceType_enum {
  NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
  NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
  NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
  NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF,
} nvmlIntNvLinkDeviceType_t;

// nvmlDeviceGetTopologyCommonAncestor: the closest common point of two GPUs on the PCIe tree.
// They map onto `nvidia-smi topo -m` words: SINGLE=PIX, MULTIPLE=PXB, HOSTBRIDGE=PHB,
// NODE=NODE, SYSTEM=SYS (INTERNAL: two GPUs on one board, reported as PIX).
typedef enum nvmlGpuLevel_enum {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50,
} nvmlGpuTopologyLevel_t;

// Buffer sizes the reference recommends for the string getters.
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_NVLINK_MAX_LINKS 18  // links per GPU the API may number (0..17)
#define NVML_DEVICE_MIG_ENABLE 1  // nvmlDeviceGetMigMode's currentMode when MIG is on

typedef struct nvmlMemory_st {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "00000000:07:00.0"
} nvmlPciInfo_t;

// MIG GPU-instance profiles (the `profile` argument of the two profile calls). Ids above
// _COUNT - 1 do not exist; ids a GPU lacks answer NOT_SUPPORTED. REV1 ids are the media
// extension ("+me") variants, REV2 the 1-compute-slice double-memory profile ("1g.20gb").
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE 1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE 2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE 3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE 4
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE 5
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE 6
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 7
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 8
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 9
#define NVML_GPU_INSTANCE_PROFILE_COUNT 10

typedef struct nvmlGpuInstanceProfileInfo_st {
  unsigned int id;  // pass to nvmlDeviceGetGpuInstances
  unsigned int isP2pSupported;
  unsigned int sliceCount;     // compute slices: the "Ng" of the profile name
  unsigned int instanceCount;  // the most instances of this profile a GPU holds
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstancePlacement_st {
  unsigned int start;  // first memory slice
  unsigned int size;   // memory slices
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceInfo_st {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

// MIG compute-instance profiles (nvmlGpuInstanceGetComputeInstanceProfileInfo's `profile`): the
// Ng profile uses N compute slices. The agent only makes compute instances that span their whole
// GPU instance (as NVIDIA's device plugin serves only those).
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 4
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE 5
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE 6
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT 8
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0

typedef struct nvmlComputeInstanceProfileInfo_st {
  unsigned int id;  // pass to nvmlGpuInstanceCreateComputeInstance
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstancePlacement_st {
  unsigned int start;
  unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlComputeInstanceInfo_st {
  nvmlDevice_t device;  // the parent GPU
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;
  unsigned int profileId;
  nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

// Events: the agent registers only for critical XID errors; eventData is the XID number.
#define nvmlEventTypeXidCriticalError 0x0000000000000008LL

typedef struct nvmlEventData_st {
  nvmlDevice_t device;  // the GPU the event is about
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

// Function pointer types, one per entry point, named after the symbol.
// nvmlDeviceGetUtilizationRates: percent of the last sample period (1/6 s to 1 s, by product)
// in which a kernel ran (gpu) and device memory was read or written (memory).
typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

// nvmlDeviceGetComputeRunningProcesses_v3 (and _v2, same layout): one process with a compute
// context on the device. usedGpuMemory is NVML_VALUE_NOT_AVAILABLE where the driver cannot say
// (no permission to see other containers' processes, some MIG setups).
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes
  unsigned int gpuInstanceId;        // 0xFFFFFFFF outside MIG
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef nvmlReturn_t (*nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t result);
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_fn)(unsigned int* count);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int index, nvmlDevice_t* device);
typedef nvmlReturn_t (*nvmlDeviceGetUUID_fn)(nvmlDevice_t device, char* uuid, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetName_fn)(nvmlDevice_t device, char* name, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t device, nvmlMemory_t* memory);
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_v3_fn)(nvmlDevice_t device, nvmlPciInfo_t* pci);
typedef nvmlReturn_t (*nvmlDeviceGetNumaNodeId_fn)(nvmlDevice_t device, unsigned int* node);
typedef nvmlReturn_t (*nvmlDeviceGetTopologyCommonAncestor_fn)(nvmlDevice_t device1,
                                                               nvmlDevice_t device2,
                                                               nvmlGpuTopologyLevel_t* level);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkState_fn)(nvmlDevice_t device, unsigned int link,
                                                    nvmlEnableState_t* is_active);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkRemotePciInfo_v2_fn)(nvmlDevice_t device,
                                                               unsigned int link,
                                                               nvmlPciInfo_t* pci);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkRemoteDeviceType_fn)(nvmlDevice_t device,
                                                               unsigned int link,
                                                               nvmlIntNvLinkDeviceType_t* type);
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t device, unsigned int* current_mode,
                                                unsigned int* pending_mode);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceProfileInfo_fn)(nvmlDevice_t device,
                                                               unsigned int profile,
                                                               nvmlGpuInstanceProfileInfo_t* info);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstances_fn)(nvmlDevice_t device, unsigned int profile_id,
                                                     nvmlGpuInstance_t* instances,
                                                     unsigned int* count);
typedef nvmlReturn_t (*nvmlGpuInstanceGetInfo_fn)(nvmlGpuInstance_t instance,
                                                  nvmlGpuInstanceInfo_t* info);
// MIG instance management (the device plugin's MIG path, mig_instances.h). A MIG device handle
// (nvmlDeviceGetMigDeviceHandleByIndex) is an nvmlDevice_t whose UUID is the "MIG-…" name the
// NVIDIA container runtime takes in NVIDIA_VISIBLE_DEVICES.
typedef nvmlReturn_t (*nvmlDeviceCreateGpuInstanceWithPlacement_fn)(
    nvmlDevice_t device, unsigned int profile_id, const nvmlGpuInstancePlacement_t* placement,
    nvmlGpuInstance_t* instance);
typedef nvmlReturn_t (*nvmlGpuInstanceDestroy_fn)(nvmlGpuInstance_t instance);
typedef nvmlReturn_t (*nvmlGpuInstanceGetComputeInstanceProfileInfo_fn)(
    nvmlGpuInstance_t instance, unsigned int profile, unsigned int eng_profile,
    nvmlComputeInstanceProfileInfo_t* info);
typedef nvmlReturn_t (*nvmlGpuInstanceCreateComputeInstance_fn)(nvmlGpuInstance_t instance,
                                                                unsigned int profile_id,
                                                                nvmlComputeInstance_t* compute);
typedef nvmlReturn_t (*nvmlGpuInstanceGetComputeInstances_fn)(nvmlGpuInstance_t instance,
                                                              unsigned int profile_id,
                                                              nvmlComputeInstance_t* computes,
                                                              unsigned int* count);
typedef nvmlReturn_t (*nvmlComputeInstanceGetInfo_v2_fn)(nvmlComputeInstance_t compute,
                                                         nvmlComputeInstanceInfo_t* info);
typedef nvmlReturn_t (*nvmlComputeInstanceDestroy_fn)(nvmlComputeInstance_t compute);
typedef nvmlReturn_t (*nvmlDeviceGetMaxMigDeviceCount_fn)(nvmlDevice_t device, unsigned int* count);
typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t device,
                                                               unsigned int index,
                                                               nvmlDevice_t* mig_device);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceId_fn)(nvmlDevice_t mig_device, unsigned int* id);
typedef nvmlReturn_t (*nvmlDeviceGetComputeInstanceId_fn)(nvmlDevice_t mig_device,
                                                          unsigned int* id);
typedef nvmlReturn_t (*nvmlEventSetCreate_fn)(nvmlEventSet_t* set);
typedef nvmlReturn_t (*nvmlDeviceRegisterEvents_fn)(nvmlDevice_t device,
                                                    unsigned long long event_types,
                                                    nvmlEventSet_t set);
typedef nvmlReturn_t (*nvmlEventSetWait_v2_fn)(nvmlEventSet_t set, nvmlEventData_t* data,
                                               unsigned int timeout_ms);
typedef nvmlReturn_t (*nvmlEventSetFree_fn)(nvmlEventSet_t set);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t device,
                                                         nvmlUtilization_t* utilization);
// Called with *count 0 and no buffer, answers INSUFFICIENT_SIZE and the count (or SUCCESS when
// there are none); then with a buffer of *count entries.
typedef nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses_fn)(nvmlDevice_t device,
                                                                unsigned int* count,
                                                                nvmlProcessInfo_t* infos);

}  // extern "C"
