// A do-nothing CUDA driver (and cuBLAS/cuSOLVER/cuSPARSE/cuRAND/cuFFT handle calls) for
// profiling our host code without a GPU: every call succeeds at once, memory is host
// memory, kernels do not run, events are complete when recorded. Results are meaningless;
// host time per call is what it shows (BENCHMARKS.md, "Host time of a launch").
//
// A timing model, off unless asked (nanoseconds, each from the environment):
//   STUB_LAUNCH_NS  host time of a kernel launch (spun in the call)
//   STUB_RECORD_NS  host time of an event record;  STUB_QUERY_NS  of an event query
//   STUB_KERNEL_NS  GPU time of a kernel: a stream runs its kernels one after another, an
//                   event completes when its stream has run what came before its record,
//                   and a synchronize spins until then
// STUB_COUNTS=1 prints, at exit, how many launches, event records, event queries, stream
// waits and synchronizes the process made: how many queries and marks a completion pays
// per launch, which the GPU hosts' lack of a profiler hides.
//
// Build and use (NVRTC from the Python wheel, as in CI; the stub is named libcuda.so only,
// so NVRTC, which opens libcuda.so.1, does not load it; $NVRTC is the wheel's nvidia/cu13):
//   gcc -O2 -shared -fPIC -o /tmp/stub/libcuda.so benches/support/stub_cuda.c
//   for n in cublas cublasLt cusolver cusparse curand cufft; do ln -sf libcuda.so /tmp/stub/lib$n.so; done
//   BENCH_WARM_UP=0 LD_LIBRARY_PATH=/tmp/stub:$NVRTC/lib ATOMR_ACCEL_CUDA_INCLUDE=$NVRTC/include
//     ACTORS_ONLY=rate cargo bench --bench actors   (under `perf record -g` for a profile)
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
typedef int CUresult;
typedef uint64_t CUdeviceptr;
#define NOT_READY 600
static uint64_t launch_ns, record_ns, query_ns, kernel_ns;
static int counts;
static uint64_t n_launch, n_record, n_query, n_wait, n_sync;
static uint64_t now_ns(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return (uint64_t)t.tv_sec*1000000000ull+(uint64_t)t.tv_nsec;}
static uint64_t env_ns(const char*n){const char*v=getenv(n);return v?strtoull(v,0,10):0;}
__attribute__((constructor)) static void stub_init(void){
  launch_ns=env_ns("STUB_LAUNCH_NS");record_ns=env_ns("STUB_RECORD_NS");
  query_ns=env_ns("STUB_QUERY_NS");kernel_ns=env_ns("STUB_KERNEL_NS");counts=getenv("STUB_COUNTS")!=0;
}
__attribute__((destructor)) static void stub_fini(void){
  if(counts)fprintf(stderr,"stub: %llu launches, %llu event records, %llu event queries, %llu stream waits, %llu synchronizes\n",
    (unsigned long long)n_launch,(unsigned long long)n_record,(unsigned long long)n_query,(unsigned long long)n_wait,(unsigned long long)n_sync);
}
static void count(uint64_t*c){__atomic_fetch_add(c,1,__ATOMIC_RELAXED);}
static void spin(uint64_t ns){if(!ns)return;uint64_t end=now_ns()+ns;while(now_ns()<end){}}
// A stream (and an event) is 8 bytes of ours: the time its last kernel ends (the time its
// stream reaches it); the default stream is `null_stream`.
static uint64_t null_stream;
static uint64_t*busy(void*s){return s?(uint64_t*)s:&null_stream;}
// Moves a stream's end to `at_least`, or past its current end by `plus` (one CAS loop:
// threads launch on one stream concurrently).
static void extend(uint64_t*b,uint64_t at_least,uint64_t plus){
  uint64_t t=__atomic_load_n(b,__ATOMIC_ACQUIRE),next;
  do{next=(t>at_least?t:at_least)+plus;if(next==t)return;}
  while(!__atomic_compare_exchange_n(b,&t,next,0,__ATOMIC_ACQ_REL,__ATOMIC_ACQUIRE));
}
static void run_kernel(void*s){count(&n_launch);spin(launch_ns);extend(busy(s),now_ns(),kernel_ns);}
static void until(uint64_t t){while(now_ns()<t){}}
static int dummy_ctx, dummy_mod, dummy_fn, dummy_lib;
CUresult cuInit(unsigned f){return 0;}
CUresult cuDriverGetVersion(int*v){*v=13000;return 0;}
CUresult cuDeviceGetCount(int*c){*c=1;return 0;}
CUresult cuDeviceGet(int*d,int o){*d=o;return 0;}
CUresult cuDeviceGetName(char*n,int len,int d){strncpy(n,"Fake H100",len);return 0;}
CUresult cuDeviceTotalMem_v2(size_t*b,int d){*b=(size_t)80<<30;return 0;}
CUresult cuDeviceGetUuid_v2(char*u,int d){memset(u,7,16);return 0;}
CUresult cuDeviceGetUuid(char*u,int d){memset(u,7,16);return 0;}
CUresult cuDeviceGetAttribute(int*v,int attr,int d){
  switch(attr){
    case 75: *v=9; break; // major
    case 76: *v=0; break; // minor
    case 1: *v=1024; break; // max threads per block
    case 2: case 3: *v=1024; break; case 4: *v=64; break;
    case 5: *v=2147483647; break; case 6: case 7: *v=65535; break;
    case 8: *v=49152; break; case 10: *v=32; break;
    case 16: *v=132; break; // SMs
    case 39: *v=2048; break; case 81: *v=233472; break; case 97: *v=233472;break;
    default: *v=1; }
  return 0;}
CUresult cuDevicePrimaryCtxRetain(void**c,int d){*c=&dummy_ctx;return 0;}
CUresult cuDevicePrimaryCtxRelease_v2(int d){return 0;}
CUresult cuDevicePrimaryCtxRelease(int d){return 0;}
CUresult cuDevicePrimaryCtxGetState(int d,unsigned*f,int*a){*f=0;*a=1;return 0;}
CUresult cuDevicePrimaryCtxSetFlags_v2(int d,unsigned f){return 0;}
CUresult cuCtxSetCurrent(void*c){return 0;}
CUresult cuCtxGetCurrent(void**c){*c=&dummy_ctx;return 0;}
CUresult cuCtxPushCurrent_v2(void*c){return 0;}
CUresult cuCtxPopCurrent_v2(void**c){*c=&dummy_ctx;return 0;}
CUresult cuCtxSynchronize(void){return 0;}
CUresult cuCtxGetDevice(int*d){*d=0;return 0;}
CUresult cuCtxSetLimit(int l,size_t v){return 0;}
CUresult cuCtxGetLimit(size_t*v,int l){*v=1024;return 0;}
CUresult cuCtxSetFlags(unsigned f){return 0;}
CUresult cuCtxGetFlags(unsigned*f){*f=0;return 0;}
CUresult cuStreamCreate(void**s,unsigned f){*s=calloc(1,8);return 0;}
CUresult cuStreamCreateWithPriority(void**s,unsigned f,int p){*s=calloc(1,8);return 0;}
CUresult cuStreamDestroy_v2(void*s){return 0;}
CUresult cuStreamSynchronize(void*s){count(&n_sync);until(__atomic_load_n(busy(s),__ATOMIC_ACQUIRE));return 0;}
CUresult cuStreamQuery(void*s){count(&n_query);spin(query_ns);return now_ns()>=__atomic_load_n(busy(s),__ATOMIC_ACQUIRE)?0:NOT_READY;}
CUresult cuStreamWaitEvent(void*s,void*e,unsigned f){count(&n_wait);extend(busy(s),__atomic_load_n((uint64_t*)e,__ATOMIC_ACQUIRE),0);return 0;}
CUresult cuStreamGetPriority(void*s,int*p){*p=0;return 0;}
CUresult cuCtxGetStreamPriorityRange(int*l,int*g){*l=0;*g=-5;return 0;}
CUresult cuEventCreate(void**e,unsigned f){*e=calloc(1,8);return 0;}
CUresult cuEventDestroy_v2(void*e){free(e);return 0;}
CUresult cuEventRecord(void*e,void*s){count(&n_record);spin(record_ns);__atomic_store_n((uint64_t*)e,__atomic_load_n(busy(s),__ATOMIC_ACQUIRE),__ATOMIC_RELEASE);return 0;}
CUresult cuEventRecordWithFlags(void*e,void*s,unsigned f){return cuEventRecord(e,s);}
CUresult cuEventQuery(void*e){count(&n_query);spin(query_ns);return now_ns()>=__atomic_load_n((uint64_t*)e,__ATOMIC_ACQUIRE)?0:NOT_READY;}
CUresult cuEventSynchronize(void*e){until(__atomic_load_n((uint64_t*)e,__ATOMIC_ACQUIRE));return 0;}
CUresult cuEventElapsedTime(float*ms,void*a,void*b){*ms=0.001f;return 0;}
CUresult cuEventElapsedTime_v2(float*ms,void*a,void*b){*ms=0.001f;return 0;}
CUresult cuMemAlloc_v2(CUdeviceptr*p,size_t n){*p=(CUdeviceptr)calloc(1,n?n:1);return 0;}
CUresult cuMemAllocAsync(CUdeviceptr*p,size_t n,void*s){*p=(CUdeviceptr)calloc(1,n?n:1);return 0;}
CUresult cuMemFree_v2(CUdeviceptr p){free((void*)p);return 0;}
CUresult cuMemFreeAsync(CUdeviceptr p,void*s){free((void*)p);return 0;}
CUresult cuMemGetInfo_v2(size_t*f,size_t*t){*f=(size_t)70<<30;*t=(size_t)80<<30;return 0;}
CUresult cuMemcpyHtoD_v2(CUdeviceptr d,const void*h,size_t n){memcpy((void*)d,h,n);return 0;}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d,const void*h,size_t n,void*s){memcpy((void*)d,h,n);return 0;}
CUresult cuMemcpyDtoH_v2(void*h,CUdeviceptr d,size_t n){memcpy(h,(void*)d,n);return 0;}
CUresult cuMemcpyDtoHAsync_v2(void*h,CUdeviceptr d,size_t n,void*s){memcpy(h,(void*)d,n);return 0;}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr a,CUdeviceptr b,size_t n,void*s){memmove((void*)a,(void*)b,n);return 0;}
CUresult cuMemsetD8Async(CUdeviceptr d,unsigned char v,size_t n,void*s){memset((void*)d,v,n);return 0;}
CUresult cuMemsetD8_v2(CUdeviceptr d,unsigned char v,size_t n){memset((void*)d,v,n);return 0;}
CUresult cuMemsetD32Async(CUdeviceptr d,unsigned v,size_t n,void*s){for(size_t i=0;i<n;i++)((unsigned*)d)[i]=v;return 0;}
CUresult cuMemHostAlloc(void**p,size_t n,unsigned f){*p=calloc(1,n?n:1);return 0;}
CUresult cuMemFreeHost(void*p){free(p);return 0;}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr*d,void*p,unsigned f){*d=(CUdeviceptr)p;return 0;}
CUresult cuMemHostRegister_v2(void*p,size_t n,unsigned f){return 0;}
CUresult cuMemHostUnregister(void*p){return 0;}
CUresult cuPointerGetAttribute(void*v,int a,CUdeviceptr p){memset(v,0,8);return 0;}
CUresult cuModuleLoadData(void**m,const void*img){*m=&dummy_mod;return 0;}
CUresult cuModuleLoadDataEx(void**m,const void*img,unsigned n,void*o,void**ov){*m=&dummy_mod;return 0;}
CUresult cuModuleGetFunction(void**f,void*m,const char*n){*f=&dummy_fn;return 0;}
CUresult cuModuleUnload(void*m){return 0;}
CUresult cuLibraryLoadData(void**l,const void*c,void*a,void*b,unsigned n,void*d,void*e,unsigned m){*l=&dummy_lib;return 0;}
CUresult cuLibraryGetKernel(void**k,void*l,const char*n){*k=&dummy_fn;return 0;}
CUresult cuFuncGetAttribute(int*v,int a,void*f){*v=(a==0)?1024:0;return 0;}
CUresult cuFuncSetAttribute(void*f,int a,int v){return 0;}
CUresult cuFuncSetCacheConfig(void*f,int c){return 0;}
CUresult cuLaunchKernel(void*f,unsigned gx,unsigned gy,unsigned gz,unsigned bx,unsigned by,unsigned bz,unsigned sm,void*s,void**p,void**e){run_kernel(s);return 0;}
CUresult cuLaunchKernelEx(void*cfg,void*f,void**p,void**e){return 0;}
CUresult cuLaunchHostFunc(void*s,void(*fn)(void*),void*d){fn(d);return 0;}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int*n,void*f,int b,size_t s){*n=2;return 0;}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int*n,void*f,int b,size_t s,unsigned fl){*n=2;return 0;}
CUresult cuGetErrorString(int e,const char**s){*s="fake error";return 0;}
CUresult cuGetErrorName(int e,const char**s){*s="FAKE_ERROR";return 0;}
CUresult cuDeviceCanAccessPeer(int*c,int a,int b){*c=0;return 0;}
CUresult cuStreamBeginCapture_v2(void*s,int m){return 0;}
CUresult cuStreamGetCaptureInfo_v3(void*s,int*st,void*a,void*b,void*c,void*d,void*e){*st=0;return 0;}
CUresult cuStreamIsCapturing(void*s,int*st){*st=0;return 0;}
static int dummy_handle;
int cublasCreate_v2(void**h){*h=&dummy_handle;return 0;}
int cublasDestroy_v2(void*h){return 0;}
int cublasSetStream_v2(void*h,void*s){return 0;}
int cublasSetWorkspace_v2(void*h,void*w,size_t n){return 0;}
int cublasSetMathMode(void*h,int m){return 0;}
int cublasSetPointerMode_v2(void*h,int m){return 0;}
int cublasLtCreate(void**h){*h=&dummy_handle;return 0;}
int cublasLtDestroy(void*h){return 0;}
int cusolverDnCreate(void**h){*h=&dummy_handle;return 0;}
int cusolverDnDestroy(void*h){return 0;}
int cusolverDnSetStream(void*h,void*s){return 0;}
int cusolverDnCreateParams(void**h){*h=&dummy_handle;return 0;}
int cusolverDnDestroyParams(void*h){return 0;}
int cusparseCreate(void**h){*h=&dummy_handle;return 0;}
int cusparseDestroy(void*h){return 0;}
int cusparseSetStream(void*h,void*s){return 0;}
int curandCreateGenerator(void**g,int t){*g=&dummy_handle;return 0;}
int curandDestroyGenerator(void*g){return 0;}
int curandSetStream(void*g,void*s){return 0;}
int curandSetPseudoRandomGeneratorSeed(void*g,unsigned long long s){return 0;}
int curandSetGeneratorOffset(void*g,unsigned long long s){return 0;}
int curandSetGeneratorOrdering(void*g,int o){return 0;}
int cufftCreate(int*p){*p=1;return 0;}
int cufftDestroy(int p){return 0;}
int cublasSgemm_v2(void*h,int ta,int tb,int m,int n,int k,const float*al,const float*a,int lda,const float*b,int ldb,const float*be,float*c,int ldc){return 0;}
int cublasDgemm_v2(void*h,int ta,int tb,int m,int n,int k,const double*al,const double*a,int lda,const double*b,int ldb,const double*be,double*c,int ldc){return 0;}
int cublasSgemmStridedBatched(void*h,int ta,int tb,int m,int n,int k,const float*al,const float*a,int lda,long long sa,const float*b,int ldb,long long sb,const float*be,float*c,int ldc,long long sc,int bc){return 0;}
int cublasDgemmStridedBatched(void*h,int ta,int tb,int m,int n,int k,const double*al,const double*a,int lda,long long sa,const double*b,int ldb,long long sb,const double*be,double*c,int ldc,long long sc,int bc){return 0;}
int cublasGemmEx(void*h,int ta,int tb,int m,int n,int k,const void*al,const void*a,int at,int lda,const void*b,int bt,int ldb,const void*be,void*c,int ct,int ldc,int ctype,int algo){return 0;}
int cublasGemmStridedBatchedEx(void*h,int ta,int tb,int m,int n,int k,const void*al,const void*a,int at,int lda,long long sa,const void*b,int bt,int ldb,long long sb,const void*be,void*c,int ct,int ldc,long long sc,int bc,int ctype,int algo){return 0;}
