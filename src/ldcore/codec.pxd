cdef extern from "zstd.h":
    ctypedef struct ZSTD_CCtx:
        pass
    ctypedef struct ZSTD_DCtx:
        pass
    const unsigned long long ZSTD_CONTENTSIZE_UNKNOWN
    const unsigned long long ZSTD_CONTENTSIZE_ERROR
    size_t ZSTD_compressBound(size_t srcSize) nogil
    ZSTD_CCtx *ZSTD_createCCtx() nogil
    size_t ZSTD_freeCCtx(ZSTD_CCtx *cctx) nogil
    size_t ZSTD_compressCCtx(ZSTD_CCtx *cctx, void *dst, size_t dstCapacity,
                             const void *src, size_t srcSize, int level) nogil
    ZSTD_DCtx *ZSTD_createDCtx() nogil
    size_t ZSTD_freeDCtx(ZSTD_DCtx *dctx) nogil
    size_t ZSTD_decompressDCtx(ZSTD_DCtx *dctx, void *dst, size_t dstCapacity,
                               const void *src, size_t srcSize) nogil
    unsigned long long ZSTD_getFrameContentSize(const void *src, size_t srcSize) nogil
    size_t ZSTD_findFrameCompressedSize(const void *src, size_t srcSize) nogil
    unsigned ZSTD_isError(size_t code) nogil
    const char *ZSTD_getErrorName(size_t code) nogil
    int ZSTD_minCLevel() nogil
    int ZSTD_maxCLevel() nogil
