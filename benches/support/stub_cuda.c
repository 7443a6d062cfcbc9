// A do-nothing CUDA driver (and cuBLAS/cuSOLVER/cuSPARSE/cuRAND/cuFFT handle calls) for
// profiling our host code without a GPU: every call succeeds at once, memory is host
// memory, kernels do not run, events are complete when recorded. Results are meaningless;
// host time per call is what it shows (BENCHMARKS.md, "Host time of a launch").
//
// Build and use (NVRTC from the Python wheel, as in CI; the stub is named libcuda.so only,
// so NVRTC, which opens libcuda.so.1, does not load it; $NVRTC is the wheel's nvidia/cu13):
//   gcc -O2 -shared -fPIC -o /tmp/stub/libcuda.so benches/support/stub_cuda.c
//   for n in cublas cublasLt cusolver cusparse curand cufft; do ln -sf libcuda.so /tmp/stub/lib$n.so; done
//   BENCH_WARM_UP=0 LD_LIBRARY_PATH=/tmp/stub:$NVRTC/lib ATOMR_ACCEL_CUDA_INCLUDE=$NVRTC/include \
//     ACTORS_ONLY=rate \
//     cargo bench --bench actors   (under `perf record -g` for a profile)
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stdio.h>
typedef int CUresult;
typedef uint64_t CUdeviceptr;
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
CUresult cuStreamCreate(void**s,unsigned f){*s=malloc(8);return 0;}
CUresult cuStreamCreateWithPriority(void**s,unsigned f,int p){*s=malloc(8);return 0;}
CUresult cuStreamDestroy_v2(void*s){return 0;}
CUresult cuStreamSynchronize(void*s){return 0;}
CUresult cuStreamQuery(void*s){return 0;}
CUresult cuStreamWaitEvent(void*s,void*e,unsigned f){return 0;}
CUresult cuStreamGetPriority(void*s,int*p){*p=0;return 0;}
CUresult cuCtxGetStreamPriorityRange(int*l,int*g){*l=0;*g=-5;return 0;}
CUresult cuEventCreate(void**e,unsigned f){*e=malloc(8);return 0;}
CUresult cuEventDestroy_v2(void*e){free(e);return 0;}
CUresult cuEventRecord(void*e,void*s){return 0;}
CUresult cuEventRecordWithFlags(void*e,void*s,unsigned f){return 0;}
CUresult cuEventQuery(void*e){return 0;}
CUresult cuEventSynchronize(void*e){return 0;}
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
CUresult cuLaunchKernel(void*f,unsigned gx,unsigned gy,unsigned gz,unsigned bx,unsigned by,unsigned bz,unsigned sm,void*s,void**p,void**e){return 0;}
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
