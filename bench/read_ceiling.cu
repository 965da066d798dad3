/*
 * bench/read_ceiling.cu - a pure streaming read, the device's read ceiling.
 *
 * A copy moves bytes both ways and a memset only writes, so neither is the
 * floor of a reduction, which only reads. This kernel reads n4 float4 values
 * once, with four independent loads in flight per thread, and writes one
 * partial sum per thread (a few hundred KiB against gigabytes read). Its PTX
 * is embedded in read_ceiling_ptx.h and loaded with cuModuleLoadData, so
 * tally-bench needs no nvcc and no link-time CUDA dependency. Regenerate with
 * bench/gen_read_ceiling_ptx.sh after editing this file.
 */
extern "C" __global__ void tally_bench_read_sum(const float4 *__restrict__ x, unsigned long long n4,
                                                float *__restrict__ partial)
{
    unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    unsigned long long i = tid;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        float4 v0 = x[i], v1 = x[i + stride], v2 = x[i + 2 * stride], v3 = x[i + 3 * stride];
        a0 += (v0.x + v0.y) + (v0.z + v0.w);
        a1 += (v1.x + v1.y) + (v1.z + v1.w);
        a2 += (v2.x + v2.y) + (v2.z + v2.w);
        a3 += (v3.x + v3.y) + (v3.z + v3.w);
    }
    for (; i < n4; i += stride) {
        float4 v = x[i];
        a0 += (v.x + v.y) + (v.z + v.w);
    }
    partial[tid] = (a0 + a1) + (a2 + a3);
}
