#pragma once

#include "flash/flash_params.h"

namespace djl_attn::flash {

// Flash attention forward on the CPU: tiled over keys with an online softmax, never holding
// more than one query tile's scores; parallel over (batch, head, query tile).
void run_flash_attention_cpu(const FlashParams& params);

}  // namespace djl_attn::flash
