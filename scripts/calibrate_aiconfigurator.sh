#!/usr/bin/env bash
# Calibrates the shipped profiles from AIConfigurator's operator tables, one chip and serving
# engine at a time (profiles/<chip>.yaml for TensorRT-LLM, <chip>-sglang.yaml, <chip>-vllm.yaml).
#
#   scripts/calibrate_aiconfigurator.sh ROOT OUT_DIR [CHIP ENGINE]...
#
# ROOT is the folder holding aiconfigurator/csv/data/<system>/<family>/<engine>/<version>/ (the
# layout of ai-dynamo/aiconfigurator's systems/data, converted to gzip CSV; the tables are not in
# this repository). Paths go into each profile's sources relative to ROOT. With no CHIP ENGINE
# pairs, every chip (h100 h200 b200 b300 gb200 gb300) and engine (trtllm sglang vllm) that has a
# GEMM table. Runs one calibration at a time (each takes 3-6 min of one core); each run's error
# table goes to OUT_DIR/<profile>.txt. SERVESIM (default build/servesim) and CREATED (default
# today) may be set.
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
root=$1
out=$(realpath -m "$2")
shift 2
servesim=$(realpath "${SERVESIM:-build/servesim}")
created=${CREATED:-$(date -u +%F)}
mkdir -p "$out"

declare -A preset=([h100]=h100-sxm [h200]=h200-sxm [b200]=b200 [b300]=b300 [gb200]=gb200 [gb300]=gb300)
declare -A system=([h100]=h100_sxm [h200]=h200_sxm [b200]=b200_sxm [b300]=b300_sxm [gb200]=gb200 [gb300]=gb300)

pairs=("$@")
if [ ${#pairs[@]} -eq 0 ]; then
  for chip in h100 h200 b200 b300 gb200 gb300; do
    for engine in trtllm sglang vllm; do pairs+=("$chip" "$engine"); done
  done
fi

cd "$root"
for ((i = 0; i < ${#pairs[@]}; i += 2)); do
  chip=${pairs[i]}
  engine=${pairs[i + 1]}
  if [ -z "${preset[$chip]:-}" ]; then
    echo "unknown chip '$chip' (h100 h200 b200 b300 gb200 gb300)" >&2
    exit 2
  fi
  data=aiconfigurator/csv/data/${system[$chip]}
  name=$chip
  [ "$engine" = trtllm ] || name=$chip-$engine
  # The newest version folder of each family holding the table (the conversion keeps one per
  # family; reuse donors sit in older folders and are found the same way).
  tables=()
  for t in gemm/gemm_perf attention/context_attention_perf attention/generation_attention_perf \
           encoder_attention/encoder_attention_perf mla/context_mla_perf mla/generation_mla_perf moe/moe_perf \
           linear_attention/gdn_perf; do
    family=${t%%/*}
    file=${t##*/}.csv.gz
    found=$(find "$data/$family/$engine" -name "$file" 2>/dev/null | sort -V | tail -1)
    # The newest MoE table may hold only formats the simulator does not cost (TensorRT-LLM
    # 1.3.0rc23 on Blackwell: DeepSeek-V4's MXFP4 x MXFP8 experts alone); then the newest older
    # version folder whose table holds bf16, fp8, fp8_block or nvfp4 experts.
    if [ "$file" = moe_perf.csv.gz ] && [ -n "$found" ]; then
      for candidate in $(find "$data/$family/$engine" -name "$file" 2>/dev/null | sort -Vr); do
        if zcat "$candidate" | awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "moe_dtype") c = i; next }
            $c == "bfloat16" || $c == "fp8" || $c == "fp8_block" || $c == "nvfp4" { found = 1 }
            END { exit !found }'; then
          found=$candidate
          break
        fi
      done
    fi
    # SGLang's Hopper context-MLA table times the absorbed kernel (query / key 576, value 512 per
    # head: AIConfigurator's collector/sglang/collect_mla.py takes those dims on every pre-Blackwell
    # chip), ~3x the FLOPs of the prefill the simulator costs and SGLang runs without cached
    # prefixes (heads of 192 / 128 after the up-projection); its rows would cost that prefill 3x.
    if [ "$engine" = sglang ] && [ "$file" = context_mla_perf.csv.gz ] && [[ $chip == h* ]]; then
      found=""
    fi
    [ -n "$found" ] && tables+=("$found")
  done
  # FlashMLA's sparse prefill kernel alone, where the engine's tables time it: SGLang's GLM-5 DSA
  # attention, vLLM's DeepSeek-V4 HCA attention (models::Efficiency::attention_sparse).
  for file in glm5_dsa_attn_module_perf.csv.gz dsv4_hca_attn_module_perf.csv.gz; do
    found=$(find "$data/sparse_attention/$engine" -name "$file" 2>/dev/null | sort -V | tail -1)
    [ -n "$found" ] && tables+=("$found")
  done
  # The DSA indexer's scoring kernel, DeepGEMM's fp8_mqa_logits, which SGLang, vLLM and
  # TensorRT-LLM all call (tensorrt_llm/_torch/attention_backend/sparse/dsa.py imports it from
  # tensorrt_llm.deep_gemm): SGLang's collector is the only one timing it alone, so every engine's
  # profile of the chip fits models::Efficiency::indexer from SGLang's table. Before the blocks
  # below, which cost their indexer with it.
  found=$(find "$data/sparse_attention/sglang" -name glm5_mqa_logits_module_perf.csv.gz 2>/dev/null | sort -V | tail -1)
  [ -n "$found" ] && tables+=("$found")
  # The top-k selection over its logits (models::Efficiency::topk): SGLang's table of its own
  # kernel (sgl-kernel's fast_topk_transform_fused) for every engine of the chip, the only one
  # timed alone (TensorRT-LLM's and vLLM's kernels differ: TensorRT-LLM's blocks below hold its
  # own, their fit takes the difference).
  found=$(find "$data/sparse_attention/sglang" -name glm5_topk_module_perf.csv.gz 2>/dev/null | sort -V | tail -1)
  [ -n "$found" ] && tables+=("$found")
  # TensorRT-LLM times its sparse kernels only inside the attention blocks (DSA on Hopper,
  # DeepSeek-V4's CSA and HCA on Blackwell): the blocks, their other operators costed as fitted,
  # fit the kernel (calibrate/README.md). SGLang's and vLLM's kernel tables above are the better
  # evidence for theirs.
  if [ "$engine" = trtllm ]; then
    for file in dsa_context_module_perf.csv.gz dsv4_csa_context_module_perf.csv.gz dsv4_hca_context_module_perf.csv.gz; do
      found=$(find "$data/sparse_attention/$engine" -name "$file" 2>/dev/null | sort -V | tail -1)
      [ -n "$found" ] && tables+=("$found")
    done
  fi
  # DeepSeek-V4's mHC kernels (models::Efficiency::mhc).
  found=$(find "$data/mhc/$engine" -name mhc_module_perf.csv.gz 2>/dev/null | sort -V | tail -1)
  [ -n "$found" ] && tables+=("$found")
  if [ ${#tables[@]} -eq 0 ] || [[ "${tables[0]}" != */gemm_perf.csv.gz ]]; then
    echo "skipped $name: no GEMM table under $data/gemm/$engine" >&2
    continue
  fi
  comm=()
  nccl=$(find "$data/comm/nccl" -name nccl_perf.csv.gz 2>/dev/null | sort -V | tail -1)
  custom=$(find "$data/comm/$engine" -name custom_allreduce_perf.csv.gz 2>/dev/null | sort -V | tail -1)
  [ -n "$nccl" ] && comm+=(--comm-table "$nccl")
  [ -n "$custom" ] && comm+=(--comm-table "$custom")
  # The grouped-GEMM MoE models that go into the profile. MXFP4 experts (gpt-oss) only for
  # TensorRT-LLM, whose tables time its own MXFP4 module (AIConfigurator's
  # collector/trtllm/collect_moe.py): on Hopper W4A16 (the OpenAI Triton kernels); on Blackwell
  # MXFP4 weights with MXFP8 activations, the mode AIConfigurator's task_v2.py gives gpt-oss on a
  # Blackwell system under TensorRT-LLM ("default MoE to w4a8_mxfp4_mxfp8"). vLLM and SGLang run
  # other MXFP4 kernels.
  moe_models=bf16,fp8,fp8_block,nvfp4
  if [ "$engine" = trtllm ]; then
    case $chip in
      h*) moe_models+=,w4a16_mxfp4 ;;
      *) moe_models+=,w4a8_mxfp4_mxfp8 ;;
    esac
  fi
  # vLLM's block-fp8 GEMM rows are not the kernel's time: at m <= 16 they are 4.7-22x SGLang's
  # rows of the same shapes (median; H100 4.7, H200 4.9, B200 10, B300 12, GB200 21, GB300 22),
  # 170-280 us a call on Blackwell whatever the shape, while both time DeepGEMM's block-fp8 kernel
  # (vLLM's kernel_source DeepGemmFp8BlockScaledMMKernel; SGLang's sglang_deepgemm_gemm_nt_f8f8bf16)
  # and vLLM's bf16 and fp8 rows match SGLang's within 1-5%. The excess doubles on the Grace hosts
  # (GB200, GB300): host time inside the timed call, which a CUDA-graph decode step does not pay.
  # Those rows come from SGLang's table of the chip.
  gemm_from=()
  if [ "$engine" = vllm ]; then
    donor=$(find "$data/gemm/sglang" -name gemm_perf.csv.gz 2>/dev/null | sort -V | tail -1)
    [ -n "$donor" ] && gemm_from+=(--gemm-from "fp8_block=$donor")
  fi
  echo "== $name: ${#tables[@]} tables, ${#comm[@]} comm options" >&2
  start=$(date +%s)
  "$servesim" calibrate "${tables[@]}" --chip "${preset[$chip]}" --engine "$engine" "${comm[@]}" "${gemm_from[@]}" \
    --moe-models "$moe_models" --created "$created" --out "$out/$name.yaml" > "$out/$name.txt"
  echo "   $name: $(( $(date +%s) - start )) s" >&2
done
