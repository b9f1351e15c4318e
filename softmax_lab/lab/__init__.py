"""The lab: what measures softmax_lab's variants, records and shows the results.

It uses the library (softmax_lab: api, variants, loader, device, problem,
reference) and the library never imports it.  From the bottom layer up:

  candidates  what the benchmark times: the variants, the copies (the floor), the peers
  timing      CUDA-event and host timers, and their statistics
  records     results documents: records, runs, the JSON schema, saving and loading
  bench       the checked, timed runs (`softmax-lab bench`, `softmax-lab sweep`)
  profile     Nsight Compute counts beside the traffic model (`softmax-lab profile`)
  report      tables of recorded results
  plots       figures of recorded results
  cli         the `softmax-lab` command (also `python -m softmax_lab`)
"""
