// gapless-fakecri: a container runtime that runs nothing, for scripts/kubelet_e2e.sh. It serves
// the CRI RuntimeService and ImageService (v1) on a Unix socket so that a real kubelet admits
// pods, calls the device plugins and "starts" containers, and it writes every CreateContainer
// request as one JSON line: what that container would have received from the device plugin
// (NVIDIA_VISIBLE_DEVICES and the share limits among its envs, devices, mounts, annotations).
//
// State lives in the in-memory fakes of k8s.io/cri-api/pkg/apis/testing; this file adds what a
// real kubelet needs on top of them (shared/docs/real-kubelet.md): images with a size, a real
// log file per container, stops and removals of missing objects that succeed, and the fork's
// extra RestoreContainer call (answered Unimplemented: only pods labelled CloneSourcePod use it).
//
// It builds only inside the Kubernetes tree the kubelet comes from (it uses that tree's vendor/):
//
//	mkdir -p /work/k8s/cmd/gapless-fakecri
//	cp scripts/kubelet_e2e/fakecri/main.go /work/k8s/cmd/gapless-fakecri/
//	cd /work/k8s && GOFLAGS=-mod=vendor CGO_ENABLED=0 go build -o /work/k8s-bin/gapless-fakecri ./cmd/gapless-fakecri
//
// Usage: gapless-fakecri -socket /tmp/x/cri.sock -records /tmp/x/creates.jsonl
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
)

type runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	rt  *apitest.FakeRuntimeService
	img *apitest.FakeImageService

	mu       sync.Mutex
	logPaths map[string]string // container ID -> its log file (the kubelet reads and deletes it)
	records  *os.File
}

// createRecord is one line of the records file.
type createRecord struct {
	Time        string            `json:"time"`
	Namespace   string            `json:"namespace"`
	Pod         string            `json:"pod"`
	UID         string            `json:"uid"`
	Container   string            `json:"container"`
	Attempt     uint32            `json:"attempt"`
	Envs        map[string]string `json:"envs"`
	Devices     []string          `json:"devices"`
	Mounts      []string          `json:"mounts"`
	Annotations map[string]string `json:"annotations"`
}

func (r *runtime) record(req *runtimeapi.CreateContainerRequest) {
	c, sb := req.GetConfig(), req.GetSandboxConfig()
	rec := createRecord{
		Time:        time.Now().UTC().Format(time.RFC3339Nano),
		Namespace:   sb.GetMetadata().GetNamespace(),
		Pod:         sb.GetMetadata().GetName(),
		UID:         sb.GetMetadata().GetUid(),
		Container:   c.GetMetadata().GetName(),
		Attempt:     c.GetMetadata().GetAttempt(),
		Envs:        map[string]string{},
		Annotations: c.GetAnnotations(),
	}
	for _, e := range c.GetEnvs() {
		rec.Envs[e.GetKey()] = e.GetValue()
	}
	for _, d := range c.GetDevices() {
		rec.Devices = append(rec.Devices, d.GetHostPath()+":"+d.GetContainerPath())
	}
	for _, m := range c.GetMounts() {
		rec.Mounts = append(rec.Mounts, m.GetHostPath()+":"+m.GetContainerPath())
	}
	line, err := json.Marshal(rec)
	if err != nil {
		log.Printf("record: %v", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.records.Write(append(line, '\n')); err != nil {
		log.Printf("record: %v", err)
	}
}

func (r *runtime) Version(ctx context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return r.rt.Version(ctx, req.GetVersion())
}

func (r *runtime) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return r.rt.Status(ctx, req.GetVerbose())
}

func (r *runtime) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	id, err := r.rt.RunPodSandbox(ctx, req.GetConfig(), req.GetRuntimeHandler())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// StopPodSandbox of a sandbox already gone succeeds: the kubelet retries stops after restarts.
func (r *runtime) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	r.rt.Lock()
	s, ok := r.rt.Sandboxes[req.GetPodSandboxId()]
	if ok {
		s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	// a stopped sandbox's containers are stopped too
	for _, c := range r.rt.Containers {
		if c.SandboxID == req.GetPodSandboxId() && c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			c.FinishedAt = time.Now().UnixNano()
		}
	}
	r.rt.Unlock()
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *runtime) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	r.rt.Lock()
	for id, c := range r.rt.Containers {
		if c.SandboxID == req.GetPodSandboxId() {
			delete(r.rt.Containers, id)
		}
	}
	delete(r.rt.Sandboxes, req.GetPodSandboxId())
	r.rt.Unlock()
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (r *runtime) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	resp, err := r.rt.PodSandboxStatus(ctx, req.GetPodSandboxId(), req.GetVerbose())
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	return resp, nil
}

func (r *runtime) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	items, err := r.rt.ListPodSandbox(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}

// CreateContainer records the request and gives the container a log file that exists, under
// the sandbox's log directory where the kubelet looks for it.
func (r *runtime) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	r.record(req)
	id, err := r.rt.CreateContainer(ctx, req.GetPodSandboxId(), req.GetConfig(), req.GetSandboxConfig())
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(req.GetSandboxConfig().GetLogDirectory(), req.GetConfig().GetLogPath())
	if req.GetSandboxConfig().GetLogDirectory() != "" && req.GetConfig().GetLogPath() != "" {
		if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err == nil {
			if f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
				f.Close()
			}
		}
		r.mu.Lock()
		r.logPaths[id] = logPath
		r.mu.Unlock()
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

func (r *runtime) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	if err := r.rt.StartContainer(ctx, req.GetContainerId()); err != nil {
		return nil, err
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer of a container already gone succeeds.
func (r *runtime) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	r.rt.Lock()
	if c, ok := r.rt.Containers[req.GetContainerId()]; ok {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.FinishedAt = time.Now().UnixNano()
	}
	r.rt.Unlock()
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *runtime) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	if err := r.rt.RemoveContainer(ctx, req.GetContainerId()); err != nil {
		return nil, err
	}
	r.mu.Lock()
	delete(r.logPaths, req.GetContainerId())
	r.mu.Unlock()
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *runtime) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	items, err := r.rt.ListContainers(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainersResponse{Containers: items}, nil
}

func (r *runtime) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := r.rt.ContainerStatus(ctx, req.GetContainerId(), req.GetVerbose())
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	r.mu.Lock()
	resp.Status.LogPath = r.logPaths[req.GetContainerId()]
	r.mu.Unlock()
	return resp, nil
}

func (r *runtime) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

func (r *runtime) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

func (r *runtime) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

func (r *runtime) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	return &runtimeapi.ContainerStatsResponse{Stats: &runtimeapi.ContainerStats{}}, nil
}

func (r *runtime) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	return &runtimeapi.ListContainerStatsResponse{}, nil
}

func (r *runtime) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	return &runtimeapi.PodSandboxStatsResponse{Stats: &runtimeapi.PodSandboxStats{}}, nil
}

func (r *runtime) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return &runtimeapi.ListPodSandboxStatsResponse{}, nil
}

func (r *runtime) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	images, err := r.img.ListImages(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListImagesResponse{Images: images}, nil
}

func (r *runtime) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	return r.img.ImageStatus(ctx, req.GetImage(), req.GetVerbose())
}

func (r *runtime) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref, err := r.img.PullImage(ctx, req.GetImage(), req.GetAuth(), req.GetSandboxConfig())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PullImageResponse{ImageRef: ref}, nil
}

func (r *runtime) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	if err := r.img.RemoveImage(ctx, req.GetImage()); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (r *runtime) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp:  time.Now().UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/"},
		UsedBytes:  &runtimeapi.UInt64Value{Value: 1 << 20},
		InodesUsed: &runtimeapi.UInt64Value{Value: 10},
	}}}, nil
}

// forgetCalls empties the fakes' call logs now and then: they grow with every CRI call.
func (r *runtime) forgetCalls() {
	for range time.Tick(10 * time.Second) {
		r.rt.Lock()
		r.rt.Called = r.rt.Called[:0]
		r.rt.Unlock()
		r.img.Lock()
		r.img.Called = r.img.Called[:0]
		r.img.Unlock()
	}
}

func main() {
	socket := flag.String("socket", "", "Unix socket to serve CRI on")
	records := flag.String("records", "", "file to append one JSON line per CreateContainer to")
	flag.Parse()
	if *socket == "" || *records == "" {
		log.Fatal("usage: gapless-fakecri -socket PATH -records FILE")
	}
	f, err := os.OpenFile(*records, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		log.Fatalf("records: %v", err)
	}
	r := &runtime{rt: apitest.NewFakeRuntimeService(), img: apitest.NewFakeImageService(),
		logPaths: map[string]string{}, records: f}
	r.img.SetFakeImageSize(100 << 20) // the kubelet refuses images without a size
	r.rt.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}
	go r.forgetCalls()
	os.Remove(*socket)
	l, err := net.Listen("unix", *socket)
	if err != nil {
		log.Fatalf("listen %s: %v", *socket, err)
	}
	s := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(s, r)
	runtimeapi.RegisterImageServiceServer(s, r)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; s.Stop() }()
	log.Printf("serving CRI on %s, records in %s", *socket, *records)
	if err := s.Serve(l); err != nil {
		log.Printf("serve: %v", err)
	}
}
